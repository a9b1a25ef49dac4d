"""What the Redis tests share: Redis's own forms (a key's cluster hash slot,
the checksum that ends a DUMP payload) and the filter types the module's
BKV.FILTER.BUILD takes."""

# Every type BKV.FILTER.BUILD takes (its error message lists them).
BUILD_TYPES = ["ribbon", "fuse8", "fuse16", "xor8", "blocked", "bloom", "cuckoo8", "cuckoo12", "cuckoo16",
               "counting"]


def crc16(data):
    """CRC16-CCITT (XMODEM), the hash of Redis Cluster's key slots."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def keyslot(key):
    """The hash slot of key: its non-empty {tag} alone when it has one."""
    k = key.encode() if isinstance(key, str) else key
    a = k.find(b"{")
    if a >= 0:
        b = k.find(b"}", a + 1)
        if b > a + 1:
            k = k[a + 1:b]
    return crc16(k) & 16383


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected), which ends a DUMP payload."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def dump_payload(body):
    """A RESTORE payload of body (type, value, RDB version) with its checksum."""
    return body + crc64(body).to_bytes(8, "little")


def cut_payload(payload, n):
    """A DUMP payload's first n bytes, then its RDB version and a checksum
    that holds: a value that ends short, which only the loader can see."""
    return dump_payload(payload[:n] + payload[-10:-8])
