# hostile: kernel modules, kexec, reboot
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("init_module", "EPERM", BAD, 16, BAD)
blocked("finit_module", "EPERM", BADFD, BAD, 0)
blocked("delete_module", "EPERM", BAD, 0)
blocked("kexec_load", "EPERM", 0, 1, BAD, 0)
blocked("kexec_file_load", "EPERM", BADFD, BADFD, 0, BAD, 0)
blocked("reboot", "EPERM", 0xfee1dead, 672274793, 0x4321fedc, BAD)   # LINUX_REBOOT_CMD_POWER_OFF
done()
