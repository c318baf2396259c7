# hostile: kernel keyrings are not namespaced (CVE-2016-0728 class): add_key, request_key, keyctl
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("add_key", "EPERM", BAD, BAD, BAD, 0, -4)
blocked("request_key", "EPERM", BAD, BAD, BAD, 0)
blocked("keyctl", "EPERM", 0, -3, 0, 0, 0)          # KEYCTL_GET_KEYRING_ID of the user keyring
blocked("keyctl", "EPERM", 1, BAD, 0, 0, 0)         # KEYCTL_JOIN_SESSION_KEYRING
done()
