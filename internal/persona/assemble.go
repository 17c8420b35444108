package persona

import (
	"fmt"
	"strings"
)

// preamble opens every system prompt (R15.3, R22.4).
const preamble = `You are running behind a chat gateway. The sections below are your configuration, read fresh from disk for this message.

Long-term memory: you may persist durable facts, decisions, IDs and lessons learned by updating %s with your Write or Edit tool. Keep its existing content, add new facts as short markdown bullet points, and never store secrets there. It is shown to you below as "Long-Term Memory".`

// Assemble builds the system prompt: the preamble, then each non-empty
// section as "## Name\n\ncontent" in Sections order (R22.1-R22.3).
//
// A "## " heading inside a file is demoted to "### " so that the prompt's
// own section headings stay unambiguous: SectionNames(Assemble(f)) always
// lists exactly the non-empty sections of f (R22.5).
func Assemble(f Files, memoryPath string) string {
	var b strings.Builder
	b.Grow(len(preamble) + 1024 + totalLen(f))
	fmt.Fprintf(&b, preamble, memoryPath)
	b.WriteString("\n\n")
	for _, s := range Sections {
		content := strings.TrimSpace(f[s.Name])
		if content == "" {
			continue
		}
		b.WriteString("## ")
		b.WriteString(s.Name)
		b.WriteString("\n\n")
		writeDemoted(&b, content)
		b.WriteString("\n\n")
	}
	return b.String()
}

func totalLen(f Files) int {
	n := 0
	for _, c := range f {
		n += len(c)
	}
	return n
}

// writeDemoted writes content with every line that starts with "## "
// turned into "### ".
func writeDemoted(b *strings.Builder, content string) {
	for len(content) > 0 {
		line, rest, found := strings.Cut(content, "\n")
		if strings.HasPrefix(line, "## ") {
			b.WriteByte('#')
		}
		b.WriteString(line)
		if found {
			b.WriteByte('\n')
		}
		content = rest
	}
}

// SectionNames lists the section headings of an assembled prompt, in order.
func SectionNames(prompt string) []string {
	var names []string
	for _, line := range strings.Split(prompt, "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

// Changes describes what changed since a session last saw the persona, as
// a note to put in front of a resumed turn's prompt (DESIGN decision 5). old
// holds the hashes the session saw; nil means unknown, so every section is
// sent. It returns "" when nothing changed.
func Changes(old map[string]string, f Files) (text string, changed []string) {
	current := f.Hashes()
	var removed []string
	var b strings.Builder
	for _, s := range Sections {
		h, now := current[s.Name]
		prev, before := old[s.Name]
		switch {
		case now && (old == nil || !before || prev != h):
			changed = append(changed, s.Name)
			b.WriteString("## ")
			b.WriteString(s.Name)
			b.WriteString("\n\n")
			writeDemoted(&b, strings.TrimSpace(f[s.Name]))
			b.WriteString("\n\n")
		case !now && before:
			removed = append(removed, s.Name)
		}
	}
	if len(changed) == 0 && len(removed) == 0 {
		return "", nil
	}
	var note strings.Builder
	note.WriteString("[Gateway note: your configuration files changed since this conversation started. These sections replace the earlier versions in your system prompt.]\n\n")
	note.WriteString(b.String())
	if len(removed) > 0 {
		fmt.Fprintf(&note, "[Removed sections, ignore their earlier versions: %s]\n", strings.Join(removed, ", "))
	}
	note.WriteString("[End of gateway note. The user's message follows.]\n\n")
	return note.String(), append(changed, removed...)
}
