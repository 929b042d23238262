import os

import requests

TOKEN = os.environ['ITEMS_TOKEN']


def create(name: str) -> dict:
    r = requests.post(
        'https://api.example.com/v1/items',
        headers={'Authorization': f'Bearer {TOKEN}'},
        json={'name': name},
        timeout=10,
    )
    r.raise_for_status()
    return r.json()
