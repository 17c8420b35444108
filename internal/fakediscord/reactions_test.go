package fakediscord

import "testing"

// Removing the bot's reaction from a message that never had one is no
// error on Discord: a process that removes ⏳ before another puts it there
// gets a 204.
func TestRemovingAReactionThatIsNotThere(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	msg := s.Post(ch, s.User("alice"), "hello")
	path := "/channels/" + ch.String() + "/messages/" + msg.ID.String() + "/reactions/%E2%8F%B3/@me"
	if status, raw := callAs(t, s, "DELETE", path, nil, ""); status != 204 {
		t.Fatalf("DELETE %s = %d %s, want 204", path, status, raw)
	}
	if status, raw := callAs(t, s, "PUT", path, nil, ""); status != 204 {
		t.Fatalf("PUT %s = %d %s, want 204", path, status, raw)
	}
	if got := s.Reactions(ch, msg.ID)["⏳"]; len(got) != 1 || got[0] != s.Bot.ID {
		t.Errorf("⏳ reactions = %v, want the bot's", got)
	}
}
