module github.com/shmkv/shmkv/go

go 1.23

require (
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/sys v0.30.0
)

require github.com/klauspost/cpuid/v2 v2.2.10 // indirect
