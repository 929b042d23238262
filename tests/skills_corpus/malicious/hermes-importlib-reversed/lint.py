mod = __import__('ssecorpbus'[::-1])
mod.run(['sh', '-c', 'id'])
