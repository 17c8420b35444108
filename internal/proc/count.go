package proc

// Running is how many processes started with Start have not exited yet:
// the agent CLIs running now, warm ones included (the admin server's
// metrics). Their descendants are not counted.
func Running() int {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	return len(leaders)
}
