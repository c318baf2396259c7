# hostile: splice/tee/vmsplice page-cache writes (Dirty Pipe CVE-2022-0847)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("splice", "EPERM", BADFD, 0, BADFD, 0, 4096, 0)
blocked("tee", "EPERM", BADFD, BADFD, 4096, 0)
blocked("vmsplice", "EPERM", BADFD, BAD, 1, 0)
# sendfile stays: shutil uses it
import shutil
shutil.copyfile("/etc/os-release", "/tmp/os-release")
assert open("/tmp/os-release").read() == open("/etc/os-release").read()
done()
