//go:build !purego

#include "textflag.h"

// func prefetchNext(bk *[128]byte)
TEXT ·prefetchNext(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bk+0(FP), AX
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func prefetchHome(bk *[128]byte)
TEXT ·prefetchHome(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bk+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func prefetchHomes(bks *[8]*[128]byte): both lines of each home bucket.
TEXT ·prefetchHomes(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bks+0(FP), AX
	MOVQ $8, CX
loop:
	MOVQ (AX), BX
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	ADDQ $8, AX
	DECQ CX
	JNZ loop
	RET

// func prefetchNexts(bks *[8]*[128]byte, ann *[8]bool): both lines of
// bucket b+1 where ann says so; elsewhere the home again (in cache): no branch.
TEXT ·prefetchNexts(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ bks+0(FP), AX
	MOVQ ann+8(FP), CX
	MOVQ $8, DI
loop:
	MOVQ (AX), BX
	MOVBQZX (CX), DX
	SHLQ $7, DX
	PREFETCHT0 (BX)(DX*1)
	PREFETCHT0 64(BX)(DX*1)
	ADDQ $8, AX
	INCQ CX
	DECQ DI
	JNZ loop
	RET
