// Package bot is vouch's service layer: it orchestrates the gate, the sandbox
// and the evidence for one verification, and (later) the webhook intake,
// queue, commands and trust. It is the only package that sees all the others.
package bot
