package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const (
	// MaxText is the most text a Message may carry, in bytes. The poster
	// splits it into Discord messages of 2000 characters.
	MaxText = 10000
	// MaxFiles is the most attachments a Message may carry: Discord's limit
	// for one message.
	MaxFiles = 10
	// maxPath is PATH_MAX: no longer attachment path can name a file.
	maxPath = 4096
)

// Message is one proactive message. Its JSON form, with these field names,
// is what a file in outbound/ holds.
type Message struct {
	// ChannelID is the Discord channel to post to, a snowflake in decimal.
	ChannelID string `json:"channel_id"`
	// Text is the message text; empty when the message only has files.
	Text string `json:"text,omitempty"`
	// Files are attachment paths as the writer gave them, resolved by
	// Options.ResolveFile before posting; nil when there are none.
	Files []string `json:"files,omitempty"`
}

// field is one member of a JSON object, in the order the file has it.
type field struct {
	name string
	raw  json.RawMessage
}

// Parse reads a Message from a file's content. It is strict, so a typo is
// reported instead of silently dropping part of the message: the content
// must be one JSON object with no trailing data, no field other than
// channel_id, text and files, and no field twice. A null field counts as
// absent. channel_id must be a string of 17 to 20 digits; text at most
// MaxText bytes; files at most MaxFiles non-empty paths without NUL bytes;
// and text or files must be present. Text that is only white space counts
// as no text and is dropped. Errors are one short sentence naming the
// field, fit for a reason file.
func Parse(data []byte) (Message, error) {
	// Validate the whole input first: the field walk below may then assume
	// well-formed JSON, and syntax errors get encoding/json's wording.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return Message{}, fmt.Errorf("not valid JSON: %w", err)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); t[0] != '{' {
		return Message{}, errors.New("the content must be a JSON object")
	}
	fields, err := objectFields(data)
	if err != nil {
		return Message{}, err
	}
	var m Message
	for _, f := range fields {
		if string(f.raw) == "null" {
			continue
		}
		switch f.name {
		case "channel_id":
			switch f.raw[0] {
			case '"':
			case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				return Message{}, errors.New("channel_id must be a string, not a number: a JSON number cannot hold a Discord id exactly")
			default:
				return Message{}, errors.New("channel_id must be a string")
			}
			if err := json.Unmarshal(f.raw, &m.ChannelID); err != nil {
				return Message{}, fmt.Errorf("channel_id: %w", err)
			}
		case "text":
			if f.raw[0] != '"' {
				return Message{}, errors.New("text must be a string")
			}
			if err := json.Unmarshal(f.raw, &m.Text); err != nil {
				return Message{}, fmt.Errorf("text: %w", err)
			}
		case "files":
			if f.raw[0] != '[' {
				return Message{}, errors.New("files must be a list of paths")
			}
			if err := json.Unmarshal(f.raw, &m.Files); err != nil {
				return Message{}, errors.New("files must be a list of strings")
			}
		default:
			return Message{}, fmt.Errorf("unknown field %s (want channel_id, text, files)", quote(f.name))
		}
	}
	if err := m.check(); err != nil {
		return Message{}, err
	}
	if strings.TrimSpace(m.Text) == "" {
		m.Text = ""
	}
	if len(m.Files) == 0 {
		m.Files = nil
	}
	return m, nil
}

// check validates the fields of a decoded Message.
func (m Message) check() error {
	if m.ChannelID == "" {
		return errors.New("channel_id is missing")
	}
	if !isSnowflake(m.ChannelID) {
		return errors.New("channel_id is not a Discord channel id (17 to 20 digits)")
	}
	if len(m.Text) > MaxText {
		return fmt.Errorf("text: at most %d bytes, got %d", MaxText, len(m.Text))
	}
	if len(m.Files) > MaxFiles {
		return fmt.Errorf("files: at most %d, got %d", MaxFiles, len(m.Files))
	}
	for i, p := range m.Files {
		switch {
		case p == "":
			return fmt.Errorf("files[%d] is empty", i)
		case strings.IndexByte(p, 0) >= 0:
			return fmt.Errorf("files[%d] contains a NUL byte", i)
		case len(p) > maxPath:
			return fmt.Errorf("files[%d]: at most %d bytes, got %d", i, maxPath, len(p))
		}
	}
	if strings.TrimSpace(m.Text) == "" && len(m.Files) == 0 {
		return errors.New("text and files are both empty: nothing to post")
	}
	return nil
}

// objectFields returns the members of the JSON object in data, which must
// already be known to be valid JSON. A name given twice is an error: which
// one counts would be up to the reader.
func objectFields(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the opening brace
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	var fields []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		name, _ := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("field %s appears twice", quote(name))
		}
		seen[name] = true
		fields = append(fields, field{name: name, raw: bytes.TrimSpace(raw)})
	}
	return fields, nil
}

// ValidChannelID reports whether s is a channel id a Message may carry.
func ValidChannelID(s string) bool { return isSnowflake(s) }

// isSnowflake reports whether s is a Discord id in canonical decimal form:
// 17 to 20 digits (every id since 2015 has at least 17), no leading zero,
// within uint64.
func isSnowflake(s string) bool {
	if len(s) < 17 || len(s) > 20 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// quote quotes a name from a file for an error message, cut short so a
// hostile file cannot make a long reason.
func quote(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
