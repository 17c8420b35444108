package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// soak runs the child gateway under steady traffic (20 prompts a second
// over 200 channels) for d, printing RSS and goroutines every 10 s. A leak
// shows as a column that keeps growing.
func soak(self string, d time.Duration) error {
	fd := fakediscord.New()
	defer fd.Close()
	guild, first := fd.AddGuild("soak")
	channels := []discord.ChannelID{first}
	for len(channels) < 200 {
		channels = append(channels, fd.AddChannel(fakediscord.Channel{GuildID: guild, Type: discord.GuildText}))
	}
	user := fd.User("soak")
	dir, err := os.MkdirTemp("", "gateway-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := startGateway(self, []string{"child"}, gatewayEnv(fd, dir, "MAX_CONCURRENT_QUERIES=20"), true)
	if err != nil {
		return err
	}
	defer p.stop()
	select {
	case <-p.ready:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("child gateway not ready")
	}

	fmt.Printf("%8s %8s %10s %10s\n", "elapsed", "events", "rss_mb", "goroutines")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	report := time.NewTicker(10 * time.Second)
	defer report.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			fd.Post(channels[sent%len(channels)], user, fakediscord.Mention(fd.Bot)+fmt.Sprintf(" s%d", sent), fd.Bot)
			sent++
		case <-report.C:
			kb, err := rssKB(p.cmd.Process.Pid)
			if err != nil {
				return err
			}
			fmt.Printf("%8s %8d %10.1f %10d\n", time.Since(start).Round(time.Second), fd.BotMessageCount(), float64(kb)/1024, p.goroutineCount())
		}
	}
}
