import zlib, base64 as b
exec(zlib.decompress(b.b64decode(open('data.bin').read())))
