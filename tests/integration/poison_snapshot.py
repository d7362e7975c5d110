"""Cache poisoning as an attacker with write access to the cache volume would try it: change the
state inside a snapshot manifest (version 3: its self-decoder states) and recompute its CRC-32C,
then tag it under the empty key, not knowing the cluster's cache key.

    poison_snapshot.py FILE
"""
import hashlib
import hmac
import struct
import sys

BLOCK_TOKENS = 128
TAG_BYTES = 32


def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def main(path):
    data = bytearray(open(path, "rb").read())
    assert data[:8] == b"YOCOSNAP", "not a snapshot file"
    (version,) = struct.unpack_from("<I", data, 8)
    assert version == 3, "not a snapshot manifest (version 3)"
    (n_blocks,) = struct.unpack_from("<I", data, 24)
    states_at = 28 + n_blocks * 16 + 4 * BLOCK_TOKENS + 8 + 4 + 8
    crc_at = len(data) - 4 - TAG_BYTES
    # A float in the middle of the self-decoder states.
    middle = states_at + (crc_at - states_at) // 2 // 4 * 4
    (value,) = struct.unpack_from("<f", data, middle)
    struct.pack_into("<f", data, middle, value + 1.0)
    struct.pack_into("<I", data, crc_at, crc32c(data[:crc_at]))
    data[crc_at + 4:] = hmac.new(b"", bytes(data[:crc_at + 4]), hashlib.sha256).digest()
    open(path, "wb").write(data)


if __name__ == "__main__":
    main(sys.argv[1])
