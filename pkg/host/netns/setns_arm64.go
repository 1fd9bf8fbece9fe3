package netns

// sysSetns is setns(2) on arm64 (package syscall does not name it).
const sysSetns = 268
