"""AES-256-CBC as the app-token platforms use it for their callbacks (Feishu/Lark's
encrypted events, WeCom's callback messages), through `cryptography`.

Both pad with PKCS#7 but to different blocks: Feishu to AES's 16 bytes, WeCom to 32.
A body that does not decrypt or unpad is `ValueError`, which the adapters turn into a
refused request.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def cbc_decrypt(key: bytes, iv: bytes, data: bytes, block: int = 16) -> bytes:
    """Decrypt and strip PKCS#7 padding of `block` bytes; ValueError when it is not."""
    if not data or len(data) % 16:
        raise ValueError("the ciphertext is not whole AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    plain = decryptor.update(data) + decryptor.finalize()
    pad = plain[-1]
    if not 1 <= pad <= block or plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("bad padding")
    return plain[:-pad]


def cbc_encrypt(key: bytes, iv: bytes, data: bytes, block: int = 16) -> bytes:
    """Pad with PKCS#7 to `block` bytes and encrypt (replies WeCom wants encrypted)."""
    pad = block - len(data) % block
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(data + bytes([pad]) * pad) + encryptor.finalize()
