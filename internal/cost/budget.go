package cost

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/card"
)

// Budget is the daily spending limits; 0 is none.
type Budget struct {
	DailyUSD, ChannelDailyUSD float64
}

// Level is how close spending is to a budget.
type Level int

const (
	LevelOK Level = iota
	// LevelWarn is 80 % of a budget or more.
	LevelWarn
	// LevelOver is the whole budget or more.
	LevelOver
)

// warnAt is the share of a budget at which the card warns.
const warnAt = 0.8

// Verdict is the state of the tighter budget.
type Verdict struct {
	Level Level
	// Channel is set when the channel's budget is the one judged; else it
	// is the gateway's.
	Channel            bool
	SpentUSD, LimitUSD float64
}

// Check judges today's spending of the channel and of the gateway against
// b; the worse of the two wins, and a budget lifted for today counts as
// not reached.
func (l *Ledger) Check(b Budget, now time.Time, channel string) Verdict {
	gw, ch := l.Spent(now, channel)
	var v Verdict
	judge := func(spent, limit float64, isChannel bool, lifted bool) {
		if limit <= 0 || lifted {
			return
		}
		lv := LevelOK
		switch {
		case spent >= limit:
			lv = LevelOver
		case spent >= warnAt*limit:
			lv = LevelWarn
		}
		if lv > v.Level {
			v = Verdict{Level: lv, Channel: isChannel, SpentUSD: spent, LimitUSD: limit}
		}
	}
	judge(gw, b.DailyUSD, false, l.Lifted(now, ""))
	if channel != "" {
		judge(ch, b.ChannelDailyUSD, true, l.Lifted(now, channel))
	}
	return v
}

// Text says the verdict in a sentence; "" when no budget is near.
func (v Verdict) Text() string {
	whose := "The gateway's"
	if v.Channel {
		whose = "This channel's"
	}
	switch v.Level {
	case LevelWarn:
		return fmt.Sprintf("%s daily budget is %d %% used (%s of %s).", whose, int(100*v.SpentUSD/v.LimitUSD), card.Dollars(v.SpentUSD), card.Dollars(v.LimitUSD))
	case LevelOver:
		return fmt.Sprintf("%s daily budget of %s is used up (%s spent today), so new prompts and scheduled runs wait until tomorrow unless an operator lifts it.",
			whose, card.Dollars(v.LimitUSD), card.Dollars(v.SpentUSD))
	}
	return ""
}

// kindNames are the kinds /cost breaks out, with their labels.
var kindNames = []struct{ kind, label string }{
	{"message", "prompts"},
	{"heartbeat", "heartbeat"},
	{"cron", "cron"},
	{"hook", "hooks"},
	{"webhook", "webhooks"},
	{KindCompact, "/compact"},
}

// KindCompact is the kind of a ledger entry for a conversation summarised
// on request (/compact): a model call of its own.
const KindCompact = "compact"

// Render formats the report for Discord.
func (r Report) Render() string {
	var b strings.Builder
	b.WriteString("**Cost**\n")
	write := func(title string, today, week, month Sum) {
		b.WriteString("__" + title + "__\n")
		for _, p := range []struct {
			name string
			s    Sum
		}{{"Today", today}, {"This week", week}, {"This month", month}} {
			fmt.Fprintf(&b, "%s: **%s**", p.name, card.Dollars(p.s.USD))
			if p.s.Estimate {
				b.WriteString(" (estimate)")
			}
			fmt.Fprintf(&b, " · %d turns", p.s.Turns)
			if parts := breakdown(p.s); parts != "" {
				b.WriteString(" · " + parts)
			}
			b.WriteByte('\n')
		}
	}
	write("This channel", r.Today, r.Week, r.Month)
	write("Whole gateway", r.GatewayToday, r.GatewayWeek, r.GatewayMonth)
	if r.GatewayMonth.Estimate {
		b.WriteString("-# Estimates are what the usage would cost on an API key; the CLI runs on a subscription login.\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// breakdown lists the spend of each kind but prompts, when there is any.
func breakdown(s Sum) string {
	var parts []string
	for _, k := range kindNames[1:] {
		if v := s.ByKind[k.kind]; v > 0 {
			parts = append(parts, k.label+" "+card.Dollars(v))
		}
	}
	var other float64
	for kind, v := range s.ByKind {
		if !slices.ContainsFunc(kindNames, func(k struct{ kind, label string }) bool { return k.kind == kind }) {
			other += v
		}
	}
	if other > 0 {
		parts = append(parts, "other "+card.Dollars(other))
	}
	return strings.Join(parts, ", ")
}
