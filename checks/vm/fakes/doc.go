// Package fakes runs the fake llama-server and the fake Mattermost inside
// the VM test host's guest, where the deployment's roles reach them on
// loopback: the deployment test (checks/vm, TestDeployment) compiles this
// package's tests (vm.GoTest), copies the binary in and starts TestServe
// as a transient unit. TestServe does nothing unless BOXMAKER_VM_FAKES
// names a directory, so it skips in every other run. It writes what the
// test needs there (llama.addr, mm.url, bot.token, owner.id), then, once
// gatewayd's WebSocket is connected, posts one direct message as the
// owner and writes the bot's answer to reply.txt.
package fakes

// Message and Answer are the chat turn the deployment test checks: the
// owner's direct message and what the fake model answers it.
const (
	Message = "hello from the owner"
	Answer  = "Hello from the VM."
)
