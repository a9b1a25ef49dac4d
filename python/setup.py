"""Builds the bloomkv Python extension for `pip install ./python`.

The extension links the bloomkv library statically. It uses the library
of an existing CMake build when it finds one (BLOOMKV_BUILD_DIR, else
../build); otherwise it builds the library with CMake first, into
python/build-lib. Needs Debian's python3-dev, cmake and the library's
build dependencies (`bash scripts/deps` installs them).
"""
import os
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def static_library():
    candidates = [os.environ.get("BLOOMKV_BUILD_DIR"), os.path.join(ROOT, "build")]
    for build in filter(None, candidates):
        lib = os.path.join(build, "libbloomkv.a")
        if os.path.exists(lib):
            return lib
    build = os.path.join(HERE, "build-lib")
    subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                           "-DBKV_BUILD_TESTS=OFF", "-DBKV_BUILD_TOOLS=OFF", "-DBKV_REDIS_MODULE=OFF",
                           "-DBKV_PYTHON=OFF"])
    subprocess.check_call(["cmake", "--build", build, "--target", "bloomkv_static", "-j", str(os.cpu_count() or 2)])
    return os.path.join(build, "libbloomkv.a")


def version():
    with open(os.path.join(ROOT, "include", "bloomkv_common.h")) as header:
        parts = {}
        for line in header:
            for part in ("MAJOR", "MINOR", "PATCH"):
                prefix = "#define BKV_VERSION_" + part + " "
                if line.startswith(prefix):
                    parts[part] = line[len(prefix):].strip()
    return "{MAJOR}.{MINOR}.{PATCH}".format(**parts)


setup(
    name="bloomkv",
    version=version(),
    description="An embedded key-value store read through approximate-membership filters, searchable by value",
    ext_modules=[
        Extension(
            "bloomkv",
            sources=[os.path.join("src", name) for name in ("module.c", "db.c", "batch.c", "snapshot.c", "iterator.c", "filter.c", "prefixed.c")],
            include_dirs=[os.path.join(ROOT, "include")],
            extra_objects=[static_library()],
            libraries=["xxhash", "zstd", "lz4", "json-c", "pthread", "m"],
            extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra"],
        )
    ],
)
