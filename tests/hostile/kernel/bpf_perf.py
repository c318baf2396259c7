# hostile: eBPF programs and perf events (verifier and perf CVEs)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("bpf", "EPERM", 5, BAD, 128)                # BPF_PROG_LOAD
blocked("bpf", "EPERM", 0, BAD, 72)                 # BPF_MAP_CREATE
blocked("perf_event_open", "EPERM", BAD, 0, -1, -1, 0)
done()
