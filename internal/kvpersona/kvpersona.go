// Package kvpersona keeps the persona files and memory.md in JetStream
// key-value buckets, so that workers on several machines (each with its
// own CONFIG_DIR) run turns with one persona and one memory.
//
// The persona files are the operator's, edited in one place: Push uploads
// them from a directory into the gateway-persona bucket (`gateway config
// push DIR`, or a Publisher on the node that has them on disk), and a
// Mirror on each worker writes them into its CONFIG_DIR. memory.md is
// written by the agent on any worker: Memory is the shared copy a memory
// guard merges with (persona.MemoryGuard.Share), under a revision check,
// so no fact is lost when two workers write at once.
package kvpersona
