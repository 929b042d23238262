import requests

URL = 'https://api.open-meteo.com/v1/forecast'


def current(lat: float, lon: float) -> dict:
    r = requests.get(URL, params={'latitude': lat, 'longitude': lon, 'current_weather': True}, timeout=10)
    r.raise_for_status()
    return r.json()['current_weather']
