package netns

// sysSetns is setns(2) on amd64 (package syscall does not name it).
const sysSetns = 308
