package backends

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// pi's RPC mode (`pi --mode rpc`, docs/rpc.md of the package) reads JSON
// commands on stdin, one a line ({"id":…,"type":"prompt","message":…}),
// and prints on stdout the response to each command
// ({"type":"response","id":…,"command":…,"success":…,"data":…}), the
// agent events of print mode's --mode json (agent_start … agent_end, no
// session header line), and the requests of extensions that want the
// user (extension_ui_request). The functions here are pure: lines in,
// values out.

// piRPCKind says what a line of pi's RPC stdout is.
type piRPCKind int

const (
	// piRPCEvent is an agent event, for PiParser.
	piRPCEvent piRPCKind = iota + 1
	// piRPCResponse answers a command.
	piRPCResponse
	// piRPCDialog is an extension asking the user (select, confirm,
	// input, editor): pi waits for an extension_ui_response.
	piRPCDialog
	// piRPCNotice is an extension's fire-and-forget UI request (notify,
	// setStatus…): nothing answers it.
	piRPCNotice
)

// piRPCLine is one line of pi's RPC stdout, classified.
type piRPCLine struct {
	Kind piRPCKind
	// Type is the line's type field (agent_end, response…).
	Type string
	// ID is a response's or a dialog's id.
	ID string
	// Command, Success, Error and Data are a response's.
	Command string
	Success bool
	Error   string
	Data    json.RawMessage
	// Method and Title are an extension request's.
	Method, Title string
}

// parsePiRPC classifies one line. A line that is not a JSON object returns
// an error wrapping errNotJSON.
func parsePiRPC(line []byte) (piRPCLine, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return piRPCLine{}, fmt.Errorf("pi rpc line: %w", errNotJSON)
	}
	var l struct {
		Type    string          `json:"type"`
		ID      json.RawMessage `json:"id"`
		Command string          `json:"command"`
		Success bool            `json:"success"`
		Error   string          `json:"error"`
		Data    json.RawMessage `json:"data"`
		Method  string          `json:"method"`
		Title   string          `json:"title"`
	}
	if err := unmarshalLenient(line, &l); err != nil {
		return piRPCLine{}, fmt.Errorf("pi rpc line: %w: %w", errNotJSON, err)
	}
	out := piRPCLine{Type: l.Type, ID: jsonString(l.ID), Command: l.Command, Success: l.Success,
		Error: l.Error, Data: l.Data, Method: l.Method, Title: l.Title}
	switch l.Type {
	case "response":
		out.Kind = piRPCResponse
	case "extension_ui_request":
		out.Kind = piRPCNotice
		switch l.Method {
		case "select", "confirm", "input", "editor":
			out.Kind = piRPCDialog
		}
	default:
		out.Kind = piRPCEvent
	}
	return out, nil
}

// piRPCState is what the gateway reads of get_state's data.
type piRPCState struct {
	SessionID   string
	SessionFile string
	// Model is "provider/id" of the model in use, "" when none.
	Model       string
	Streaming   bool
	Compacting  bool
	PendingMsgs int
}

// parsePiRPCState reads get_state's data.
func parsePiRPCState(data json.RawMessage) piRPCState {
	var d struct {
		SessionID   string `json:"sessionId"`
		SessionFile string `json:"sessionFile"`
		Model       *struct {
			Provider string `json:"provider"`
			ID       string `json:"id"`
		} `json:"model"`
		IsStreaming         bool            `json:"isStreaming"`
		IsCompacting        bool            `json:"isCompacting"`
		PendingMessageCount json.RawMessage `json:"pendingMessageCount"`
	}
	if unmarshalLenient(data, &d) != nil {
		return piRPCState{}
	}
	s := piRPCState{SessionID: d.SessionID, SessionFile: d.SessionFile, Streaming: d.IsStreaming,
		Compacting: d.IsCompacting, PendingMsgs: int(jsonInt(d.PendingMessageCount))}
	if d.Model != nil && d.Model.ID != "" {
		s.Model = d.Model.ID
		if d.Model.Provider != "" {
			s.Model = d.Model.Provider + "/" + d.Model.ID
		}
	}
	return s
}

// piRPCContext reads get_session_stats' data: how much of the context
// window the session fills, and the window. Zeros when pi does not say
// (no model, or right after a compaction).
func piRPCContext(data json.RawMessage) (tokens, window int64) {
	var d struct {
		ContextUsage *struct {
			Tokens        json.RawMessage `json:"tokens"`
			ContextWindow json.RawMessage `json:"contextWindow"`
		} `json:"contextUsage"`
	}
	if unmarshalLenient(data, &d) != nil || d.ContextUsage == nil {
		return 0, 0
	}
	return jsonInt(d.ContextUsage.Tokens), jsonInt(d.ContextUsage.ContextWindow)
}

// piRPCCommand is a command without arguments (get_state, abort…).
func piRPCCommand(id, typ string) []byte {
	return piRPCMarshal(map[string]any{"id": id, "type": typ})
}

// piRPCImage is pi's ImageContent.
type piRPCImage struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// piRPCPrompt is the prompt command. Images go as image content (base64);
// an image without data is left out (the prompt names its path).
func piRPCPrompt(id, message string, images []Image) []byte {
	cmd := map[string]any{"id": id, "type": "prompt", "message": message}
	var imgs []piRPCImage
	for _, im := range images {
		if len(im.Data) == 0 || im.MediaType == "" {
			continue
		}
		imgs = append(imgs, piRPCImage{Type: "image", Data: base64.StdEncoding.EncodeToString(im.Data), MimeType: im.MediaType})
	}
	if len(imgs) > 0 {
		cmd["images"] = imgs
	}
	return piRPCMarshal(cmd)
}

// piRPCSteer is the steer command: text for pi to take into the running
// prompt before its next model call.
func piRPCSteer(id, text string) []byte {
	return piRPCMarshal(map[string]any{"id": id, "type": "steer", "message": text})
}

// piRPCDialogCancel dismisses an extension's dialog: the gateway has no
// way to show it to anyone.
func piRPCDialogCancel(id string) []byte {
	return piRPCMarshal(map[string]any{"type": "extension_ui_response", "id": id, "cancelled": true})
}

func piRPCMarshal(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Strings, a bool and []piRPCImage: cannot fail.
		panic(fmt.Sprintf("pi rpc command: %v", err))
	}
	return append(b, '\n')
}

// piRPCTurn maps the stdout lines of one prompt to events, and tells when
// the agent has finished with it. It is pure and used by one goroutine.
//
// A prompt's events end with agent_end. pi's own retries (auto_retry_start
// after an agent_end) and an automatic compaction (compaction_start) can
// follow it, so agent_end alone does not end the turn: the adapter then
// asks get_state, and the turn is over when the answer says pi is neither
// streaming nor compacting and no retry is under way (Settled).
type piRPCTurn struct {
	parser PiParser
	// compacted is set by a compaction_end that summarised the session.
	compacted bool
	// compacting is set between compaction_start and compaction_end.
	compacting bool

	// userMessages counts the user messages pi took into the run: the
	// prompt, then each steered message it injected.
	userMessages int
	// answers are the final answers (assistant messages that ended the
	// model's turn) given before a steered message was injected; the
	// turn's text joins them with the last.
	answers []string
	// steerable is set while pi will still look at its steering queue in
	// this run: from agent_start until a final assistant message ends.
	steerable bool
	// queued is how many steered messages pi holds and has not injected
	// (its last queue_update).
	queued int
}

// newPiRPCTurn starts a turn of the session sessionID; the first events
// carry it (EventInit first, from Start).
func newPiRPCTurn() *piRPCTurn { return &piRPCTurn{} }

// Start returns the turn's EventInit for the session pi holds.
func (t *piRPCTurn) Start(sessionID string) []Event {
	if sessionID == "" {
		return nil
	}
	line, _ := json.Marshal(map[string]string{"type": "session", "id": sessionID})
	events, _ := t.parser.Parse(line)
	return append([]Event(nil), events...)
}

// Event maps an agent event line (a piRPCEvent) to gateway events. The
// returned slice is reused by the next call.
func (t *piRPCTurn) Event(l piRPCLine, line []byte) ([]Event, error) {
	switch l.Type {
	case "agent_start":
		t.steerable = true
	case "agent_end":
		t.steerable = false
	case "queue_update":
		var q struct {
			Steering []json.RawMessage `json:"steering"`
		}
		if unmarshalLenient(line, &q) == nil {
			t.queued = len(q.Steering)
		}
	case "message_start", "message_end":
		t.message(l.Type, line)
	case "compaction_start":
		t.compacting = true
	case "compaction_end":
		t.compacting = false
		var c struct {
			Result  json.RawMessage `json:"result"`
			Aborted bool            `json:"aborted"`
		}
		if unmarshalLenient(line, &c) == nil && !c.Aborted && !isJSONNull(c.Result) && len(c.Result) > 0 {
			t.compacted = true
		}
	}
	return t.parser.Parse(line)
}

// message follows the user and assistant messages of the run: a user
// message after the prompt is a steered one pi injected, and an assistant
// message that did not stop for tools ends the model's answer (pi looks
// at its steering queue once more after it, then ends the run).
func (t *piRPCTurn) message(typ string, line []byte) {
	var m struct {
		Message *piMessage `json:"message"`
	}
	if unmarshalLenient(line, &m) != nil || m.Message == nil {
		return
	}
	switch {
	case typ == "message_start" && m.Message.Role == "user":
		t.userMessages++
		if t.userMessages > 1 {
			// pi goes on with another model call, and looks at its
			// queue again after it.
			t.steerable = true
			if last := t.parser.last; last != nil && last.StopReason != "toolUse" {
				if text := piText(last.Content); text != "" {
					t.answers = append(t.answers, text)
				}
			}
		}
	case typ == "message_end" && m.Message.Role == "assistant" && m.Message.StopReason != "toolUse":
		t.steerable = false
	case typ == "message_end" && m.Message.Role == "assistant":
		t.steerable = true
	}
}

// Steerable reports whether a message steered now would still be taken
// into this run: pi checks its steering queue after each model turn, so
// until the answer's last message has ended.
func (t *piRPCTurn) Steerable() bool { return t.steerable }

// Queued is how many steered messages pi still holds uninjected.
func (t *piRPCTurn) Queued() int { return t.queued }

// AgentEnded reports whether the last agent event ended the agent's run
// with no retry started since.
func (t *piRPCTurn) AgentEnded() bool { return t.parser.ended && !t.parser.retrying }

// Settled reports whether the turn is over, given pi's answer to a
// get_state sent after agent_end.
func (t *piRPCTurn) Settled(s piRPCState) bool {
	return t.AgentEnded() && !t.compacting && !s.Streaming && !s.Compacting
}

// Result is the turn's outcome (see PiParser.Result).
func (t *piRPCTurn) Result() (Result, error) {
	res, err := t.parser.Result()
	res.Compacted = t.compacted
	if len(t.answers) > 0 {
		// Steered messages were answered after the prompt's answer: the
		// reply holds every answer, as the card streamed them.
		texts := append([]string(nil), t.answers...)
		if res.Text != "" {
			texts = append(texts, res.Text)
		}
		res.Text = strings.Join(texts, "\n\n")
	}
	return res, err
}

// Answered reports whether the model produced any output this turn.
func (t *piRPCTurn) Answered() bool { return t.parser.textSent || t.parser.turns > 0 }
