-- tollgate: forget a key's state (every algorithm keeps all of it in this one key).
-- KEYS[1]: the state key.  Reply: {1} if there was state, {0} if not.
return {redis.call('DEL', KEYS[1])}
