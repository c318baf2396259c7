# hostile: positive control: json, re, decimal, zlib, hashlib, uuid, random, datetime
# expect: exit=0 stdout="OK\n"
import json, re, decimal, zlib, hashlib, uuid, random, datetime, tempfile
assert json.loads(json.dumps({"a": [1, 2.5, None]})) == {"a": [1, 2.5, None]}
assert re.findall(r"\d+", "a1b22c333") == ["1", "22", "333"]
decimal.getcontext().prec = 50
assert str(decimal.Decimal(1) / decimal.Decimal(7))[:12] == "0.1428571428"
data = b"x" * 100000
assert zlib.decompress(zlib.compress(data)) == data
assert hashlib.sha256(b"").hexdigest().startswith("e3b0c442")
uuid.uuid4(); uuid.uuid1()
random.SystemRandom().random()
datetime.datetime.now().isoformat()
with tempfile.NamedTemporaryFile() as f:
    f.write(b"x")
print("OK")
