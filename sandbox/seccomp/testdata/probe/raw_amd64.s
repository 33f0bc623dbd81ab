#include "textflag.h"

// func int80(nr uintptr) uintptr
TEXT ·int80(SB), NOSPLIT, $0-16
	MOVQ nr+0(FP), AX
	INT  $0x80
	MOVQ AX, ret+8(FP)
	RET

// func rawClone(flags uintptr) (pid, errno uintptr)
TEXT ·rawClone(SB), NOSPLIT, $0-24
	MOVQ flags+0(FP), DI
	XORQ SI, SI          // no new stack: the child runs on a copy of ours
	XORQ DX, DX          // parent_tid
	XORQ R10, R10        // child_tid
	XORQ R8, R8          // tls
	MOVQ $56, AX         // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JNE  parent
	MOVQ $0, DI          // child: exit_group(0) at once
	MOVQ $231, AX        // SYS_exit_group
	SYSCALL
	HLT

parent:
	CMPQ AX, $0xfffffffffffff001
	JLS  ok
	NEGQ AX
	MOVQ $0, pid+8(FP)
	MOVQ AX, errno+16(FP)
	RET

ok:
	MOVQ AX, pid+8(FP)
	MOVQ $0, errno+16(FP)
	RET
