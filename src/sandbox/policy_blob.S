/* Embeds policies/default.yaml so the binary needs no data files. */
	.section .rodata
	.global nsbox_default_policy
	.hidden nsbox_default_policy
	.type nsbox_default_policy, @object
nsbox_default_policy:
	.incbin POLICY_FILE
	.byte 0
	.size nsbox_default_policy, . - nsbox_default_policy
	.section .note.GNU-stack,"",@progbits
