/* Embeds the runsc-exec helper (src/helper/runsc-exec.c) so runtime runsc
 * needs no installed data files: it is written into each run's bundle. */
	.section .rodata
	.global nsbox_runsc_exec
	.hidden nsbox_runsc_exec
	.type nsbox_runsc_exec, @object
	.balign 16
nsbox_runsc_exec:
	.incbin HELPER_FILE
nsbox_runsc_exec_end:
	.size nsbox_runsc_exec, . - nsbox_runsc_exec
	.global nsbox_runsc_exec_len
	.hidden nsbox_runsc_exec_len
	.type nsbox_runsc_exec_len, @object
	.balign 8
nsbox_runsc_exec_len:
	.quad nsbox_runsc_exec_end - nsbox_runsc_exec
	.size nsbox_runsc_exec_len, 8
	.section .note.GNU-stack,"",@progbits
