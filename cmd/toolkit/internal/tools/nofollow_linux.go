package tools

import "syscall"

const (
	noFollow = syscall.O_NOFOLLOW
	nonBlock = syscall.O_NONBLOCK
)

// tmpfsMagic is statfs's f_type for tmpfs (linux/magic.h TMPFS_MAGIC).
const tmpfsMagic = 0x01021994
