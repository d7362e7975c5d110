"""Cache poisoning as an attacker with write access to the cache volume would try it: change the
state inside a snapshot file and recompute every checksum (the embedded state bundle's CRC-32C
and the file's), then tag it under the empty key, not knowing the cluster's cache key.

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
    (n_blocks,) = struct.unpack_from("<I", data, 24)
    bundle_at = 28 + n_blocks * (16 + 4 * BLOCK_TOKENS) + 8
    (bundle_bytes,) = struct.unpack_from("<Q", data, bundle_at - 8)
    bundle_end = bundle_at + bundle_bytes
    # A float in the middle of the state: K/V rows or a retention state.
    middle = bundle_at + bundle_bytes // 2 // 4 * 4
    (value,) = struct.unpack_from("<f", data, middle)
    struct.pack_into("<f", data, middle, value + 1.0)
    struct.pack_into("<I", data, bundle_end - 4, crc32c(data[bundle_at:bundle_end - 4]))
    crc_at = len(data) - 4 - TAG_BYTES
    assert crc_at == bundle_end
    struct.pack_into("<I", data, crc_at, crc32c(data[:crc_at]))
    data[crc_at + 4:] = hmac.new(b"", bytes(data[:crc_at + 4]), hashlib.sha256).digest()
    open(path, "wb").write(data)


if __name__ == "__main__":
    main(sys.argv[1])
