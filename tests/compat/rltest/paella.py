"""Stub of RedisBloom's platform helper, which its common.py asks for names only."""


class Platform:
    osnick = os = arch = "debian"
