package actions

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		clean  string
		blocks []string // Raw of each block; "!" prefix: unreadable
	}{
		{"the seed's example",
			"Here are the channels.\n<discord-action>{\"type\":\"channelList\"}</discord-action>",
			"Here are the channels.", []string{`{"type":"channelList"}`}},
		{"no blocks", "Just text.", "Just text.", nil},
		{"two blocks on one line, text around",
			`Done <discord-action>{"type":"react","emoji":"👍"}</discord-action> and <discord-action>{"type":"pinMessage"}</discord-action> now.`,
			"Done  and  now.", []string{`{"type":"react","emoji":"👍"}`, `{"type":"pinMessage"}`}},
		{"braces and the closing tag inside strings",
			`<discord-action>{"type":"sendMessage","content":"a } b { </discord-action> c"}</discord-action>`,
			"", []string{`{"type":"sendMessage","content":"a } b { </discord-action> c"}`}},
		{"a block over several lines",
			"Creating it.\n<discord-action>{\n  \"type\": \"channelCreate\",\n  \"name\": \"standup\"\n}</discord-action>\nBye.",
			"Creating it.\n\nBye.", []string{"{\n  \"type\": \"channelCreate\",\n  \"name\": \"standup\"\n}"}},
		{"inside a fenced code block: an example, kept and not run",
			"Write it like this:\n```\n<discord-action>{\"type\":\"channelList\"}</discord-action>\n```\n",
			"Write it like this:\n```\n<discord-action>{\"type\":\"channelList\"}</discord-action>\n```", nil},
		{"inside inline code: kept",
			"Use `<discord-action>{\"type\":\"roleList\"}</discord-action>` to list roles.",
			"Use `<discord-action>{\"type\":\"roleList\"}</discord-action>` to list roles.", nil},
		{"after a fence closes, blocks run again",
			"~~~\nx\n~~~\n<discord-action>{\"type\":\"roleList\"}</discord-action>",
			"~~~\nx\n~~~", []string{`{"type":"roleList"}`}},
		{"not JSON: removed and reported",
			"Hi <discord-action>channelList please</discord-action> there",
			"Hi  there", []string{"!channelList please"}},
		{"no closing tag after the JSON",
			"<discord-action>{\"type\":\"roleList\"} and more",
			"and more", []string{`!{"type":"roleList"}`}},
		{"no closing tag, not JSON: to the end of the line",
			"Text\n<discord-action>{\"type\": \nnext line",
			"Text\n\nnext line", []string{"!{\"type\":"}},
		{"a JSON array is not an action",
			`<discord-action>[{"type":"roleList"}]</discord-action>`,
			"", []string{`![{"type":"roleList"}]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clean, blocks := Parse(tc.text)
			if clean != tc.clean {
				t.Errorf("clean = %q, want %q", clean, tc.clean)
			}
			var got []string
			for _, b := range blocks {
				s := b.Raw
				if b.Err != nil {
					s = "!" + s
				}
				got = append(got, s)
			}
			if d := cmp.Diff(tc.blocks, got); d != "" {
				t.Errorf("blocks (-want +got):\n%s", d)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<discord-action>{\"type\":\"channelList\"}</discord-action>",
		"a\n```\n<discord-action>{}</discord-action>\n```\nb <discord-action>{\"x\":\"}\"}</discord-action>",
		"`<discord-action>` <discord-action>{\"type\":1}",
		"<discord-action><discord-action>{}</discord-action></discord-action>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		clean, blocks := Parse(text)
		if !strings.Contains(text, OpenTag) && (clean != text || len(blocks) != 0) {
			t.Fatalf("text without blocks changed: %q → %q", text, clean)
		}
		if len(clean) > len(text) {
			t.Fatalf("clean text longer than the reply: %q → %q", text, clean)
		}
		// What is left runs nothing: the blocks that stay are examples.
		if again, more := Parse(clean); len(more) != 0 {
			t.Fatalf("clean text %q still has %d blocks (from %q; again %q)", clean, len(more), text, again)
		}
		for _, b := range blocks {
			if _, err := Decode(b); err == nil && b.Err != nil {
				t.Fatalf("an unreadable block decoded: %+v", b)
			}
		}
	})
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string // "" for success
	}{
		{`{"type":"channelCreate","name":"standup","topic":"t"}`, ""},
		{`{"type":"channelCreate"}`, "channelCreate: missing name"},
		{`{"type":"channelCreate","name":7}`, "channelCreate: name must be a string"},
		{`{"type":"channelCreate","name":"x","topc":"t"}`, `channelCreate: unknown field "topc"`},
		{`{"type":"readMessages","channel":"general","limit":"20"}`, ""},
		{`{"type":"readMessages","channel":"general","limit":2.5}`, "readMessages: limit must be a whole number"},
		{`{"type":"pollCreate","question":"q","answers":"a"}`, "pollCreate: answers must be a list of strings"},
		{`{"type":"pollCreate","question":"q","answers":["a","b"],"multiSelect":"yes"}`, "pollCreate: multiSelect must be true or false"},
		{`{"type":"teleport"}`, `unknown action type "teleport"`},
		{`{"name":"x"}`, `could not read action: it has no "type"`},
		{`{"type":"channelInfo","channel":null}`, "channelInfo: missing channel"},
	} {
		_, err := Decode(Block{Raw: tc.raw})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Decode(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	if _, err := Decode(Block{Raw: "x", Err: ErrNotJSON}); err == nil || !errors.Is(err, ErrNotJSON) || !strings.HasPrefix(err.Error(), "could not read action") {
		t.Errorf("an unreadable block: %v", err)
	}
}

// Every example in the catalog decodes as its own type: the prompt never
// teaches a block the gateway would refuse.
func TestCatalogExamplesDecode(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Specs {
		if seen[s.Type] {
			t.Errorf("%s listed twice", s.Type)
		}
		seen[s.Type] = true
		a, err := Decode(Block{Raw: s.Example})
		if err != nil {
			t.Errorf("%s: example %s: %v", s.Type, s.Example, err)
			continue
		}
		if a.Spec.Type != s.Type {
			t.Errorf("%s: example is a %s", s.Type, a.Spec.Type)
		}
	}
}

func TestCheck(t *testing.T) {
	f := DefaultFlags()
	guild := Context{GuildID: "1"}
	spec := func(typ string) *Spec { s, _ := Lookup(typ); return s }
	for _, tc := range []struct {
		flags Flags
		ctx   Context
		typ   string
		want  error
	}{
		{f, guild, "channelCreate", nil},
		{f, Context{}, "channelCreate", ErrNoGuild},
		{f, guild, "kick", ErrDisabled}, // moderation is off by default
		{f, Context{GuildID: "1", Scheduled: true}, "sendMessage", nil},
		{f, Context{GuildID: "1", Scheduled: true}, "cronCreate", ErrScheduled},
		{f, Context{GuildID: "1", Scheduled: true}, "memoryRemember", ErrScheduled},
		{f, Context{GuildID: "1", Scheduled: true}, "channelDelete", ErrScheduled},
		{Flags{Enabled: false, Categories: f.Categories}, guild, "channelList", ErrDisabled},
	} {
		err := tc.flags.Check(tc.ctx, spec(tc.typ))
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s in %+v: %v, want %v", tc.typ, tc.ctx, err, tc.want)
		}
	}
	if got := PromptSection(f.Available(Context{}), 10); got != "" {
		t.Errorf("actions advertised in a DM: %q", got)
	}
	p := PromptSection(f.Available(guild), 10)
	if !strings.Contains(p, `{"type":"channelCreate","name":"standup"`) || strings.Contains(p, "kick") {
		t.Errorf("prompt section lacks an enabled example or shows a disabled one:\n%s", p)
	}
}
