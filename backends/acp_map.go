package backends

import (
	"encoding/json"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// acpPlanTool is the tool name under which an agent's plan (an ACP plan
// update) reaches the turn card: the card shows it like any tool call,
// with the entries as its input.
const acpPlanTool = "Plan"

// acpMapper turns one turn's session/update notifications into Events. It
// is pure: updates in, events out, and it keeps what the turn's Result
// needs (the text, the tools, the context use). One mapper serves one
// turn of one session.
type acpMapper struct {
	session string
	// model is the model the turn runs on, as far as known.
	model string
	text  strings.Builder
	// tools are the tool calls seen this turn by id: whether their result
	// was reported already.
	tools map[string]bool
	// unshown are the calls announced without their input (opencode sends
	// it with the call's in_progress update), by id with their name: the
	// card gets the call once its input is known, or it runs or ends.
	unshown map[string]string
	// thinking is set while the agent's last update was a thought chunk,
	// so that a run of thought chunks reports EventThinking once.
	thinking bool
	// contextUsed and contextSize come from usage_update.
	contextUsed, contextSize int64
	costUSD                  float64
	planSeq                  int
}

func newACPMapper(session string) *acpMapper {
	return &acpMapper{session: session, tools: map[string]bool{}, unshown: map[string]string{}}
}

// Map returns the events one update carries; most carry one or none.
func (m *acpMapper) Map(u acp.SessionUpdate) []Event {
	thought := u.AgentThoughtChunk != nil
	defer func() { m.thinking = thought }()
	switch {
	case u.AgentMessageChunk != nil:
		return m.message(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		if m.thinking {
			return nil
		}
		return []Event{{Kind: EventThinking, SessionID: m.session}}
	case u.ToolCall != nil:
		return m.toolCall(u.ToolCall)
	case u.ToolCallUpdate != nil:
		return m.toolCallUpdate(u.ToolCallUpdate)
	case u.Plan != nil:
		return m.plan(u.Plan.Entries)
	case u.UsageUpdate != nil:
		m.contextUsed = int64(u.UsageUpdate.Used)
		m.contextSize = int64(u.UsageUpdate.Size)
		if c := u.UsageUpdate.Cost; c != nil && strings.EqualFold(c.Currency, "USD") {
			m.costUSD = c.Amount
		}
	}
	return nil
}

func (m *acpMapper) message(c acp.ContentBlock) []Event {
	if c.Text == nil || c.Text.Text == "" {
		return nil
	}
	m.text.WriteString(c.Text.Text)
	return []Event{{Kind: EventText, SessionID: m.session, Text: c.Text.Text}}
}

func (m *acpMapper) toolCall(tc *acp.SessionUpdateToolCall) []Event {
	id := string(tc.ToolCallId)
	if _, seen := m.tools[id]; seen {
		// A repeated tool_call for the same id updates it.
		st := tc.Status
		return append(m.reveal(id, tc.RawInput, st), m.finish(id, tc.Title, &st)...)
	}
	st := tc.Status
	name := acpToolName(tc.Title, tc.Kind)
	if !acpShowable(tc.RawInput, st) {
		m.tools[id] = false
		m.unshown[id] = name
		return nil
	}
	evs := []Event{m.use(id, name, tc.RawInput)}
	return append(evs, m.finish(id, tc.Title, &st)...)
}

func (m *acpMapper) toolCallUpdate(tu *acp.SessionToolCallUpdate) []Event {
	id := string(tu.ToolCallId)
	var st acp.ToolCallStatus
	if tu.Status != nil {
		st = *tu.Status
	}
	evs := m.reveal(id, tu.RawInput, st)
	if _, seen := m.tools[id]; !seen {
		// An update for a call the turn has not seen (a call started in a
		// turn that was cancelled, or an agent that skips tool_call).
		title := ""
		if tu.Title != nil {
			title = *tu.Title
		}
		var kind acp.ToolKind
		if tu.Kind != nil {
			kind = *tu.Kind
		}
		evs = append(evs, m.use(id, acpToolName(title, kind), tu.RawInput))
	}
	title := ""
	if tu.Title != nil {
		title = *tu.Title
	}
	return append(evs, m.finish(id, title, tu.Status)...)
}

// reveal shows a call announced without its input once an update brings
// the input, or says it runs or ended.
func (m *acpMapper) reveal(id string, raw any, st acp.ToolCallStatus) []Event {
	name, ok := m.unshown[id]
	if !ok || !acpShowable(raw, st) {
		return nil
	}
	delete(m.unshown, id)
	return []Event{m.use(id, name, raw)}
}

// acpShowable reports whether a call can go on the card: its input is
// known, or it is past pending.
func acpShowable(raw any, st acp.ToolCallStatus) bool {
	return !acpEmptyInput(raw) || (st != "" && st != acp.ToolCallStatusPending)
}

func (m *acpMapper) use(id, name string, raw any) Event {
	m.tools[id] = false
	return Event{Kind: EventToolUse, SessionID: m.session, Tool: &ToolCall{ID: id, Name: name, Input: acpRawJSON(raw)}}
}

// finish reports the call's result once, when its status says it ended.
func (m *acpMapper) finish(id, title string, st *acp.ToolCallStatus) []Event {
	if st == nil || m.tools[id] {
		return nil
	}
	switch *st {
	case acp.ToolCallStatusCompleted, acp.ToolCallStatusFailed:
	default:
		return nil
	}
	m.tools[id] = true
	return []Event{{Kind: EventToolResult, SessionID: m.session, Tool: &ToolCall{
		ID: id, Name: title, IsError: *st == acp.ToolCallStatusFailed,
	}}}
}

// plan reports the agent's plan as a tool call named Plan whose input lists
// the entries with their status, so the card shows the latest plan.
func (m *acpMapper) plan(entries []acp.PlanEntry) []Event {
	type entry struct {
		Content string `json:"content"`
		Status  string `json:"status"`
	}
	list := make([]entry, 0, len(entries))
	for _, e := range entries {
		list = append(list, entry{Content: e.Content, Status: string(e.Status)})
	}
	b, err := json.Marshal(map[string]any{"entries": list})
	if err != nil {
		return nil
	}
	m.planSeq++
	id := "plan-" + strconv.Itoa(m.planSeq)
	m.tools[id] = true
	return []Event{{Kind: EventToolUse, SessionID: m.session, Tool: &ToolCall{ID: id, Name: acpPlanTool, Input: string(b)}}}
}

// running reports how many of the turn's tool calls have not finished: a
// tool may run for long without the agent saying anything.
func (m *acpMapper) running() int {
	n := 0
	for _, done := range m.tools {
		if !done {
			n++
		}
	}
	return n
}

// Result is the turn's outcome once the prompt returned.
func (m *acpMapper) Result(resp acp.PromptResponse) Result {
	res := Result{
		SessionID:      m.session,
		Model:          m.model,
		Text:           m.text.String(),
		SessionCostUSD: m.costUSD,
		ContextTokens:  m.contextUsed,
		ContextWindow:  m.contextSize,
		Turns:          1,
	}
	if u, ok := acpMetaUsage(resp.Meta); ok && resp.Usage == nil {
		res.Usage = u
	}
	if u := resp.Usage; u != nil {
		res.Usage = Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
		if u.CachedReadTokens != nil {
			res.Usage.CacheReadTokens = int64(*u.CachedReadTokens)
		}
		if u.CachedWriteTokens != nil {
			res.Usage.CacheCreationTokens = int64(*u.CachedWriteTokens)
		}
	}
	return res
}

// acpToolName is what the card calls a tool: the agent's title ("Read
// file.go"), or its kind when it gave no title.
func acpToolName(title string, kind acp.ToolKind) string {
	if t := strings.TrimSpace(title); t != "" {
		return t
	}
	if kind != "" {
		return string(kind)
	}
	return "tool"
}

// acpEmptyInput reports whether a tool's raw input says nothing: absent,
// null or an empty object.
func acpEmptyInput(raw any) bool {
	in := acpRawJSON(raw)
	return in == "" || in == "null" || in == "{}"
}

// acpRawJSON is a tool's raw input as JSON text, empty when there is none.
func acpRawJSON(raw any) string {
	if raw == nil {
		return ""
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return ""
	}
	return string(b)
}

// acpMetaUsage reads the token counts gemini 0.61.0 sends in the prompt
// response's _meta.quota.token_count instead of the usage field.
func acpMetaUsage(meta map[string]any) (Usage, bool) {
	quota, _ := meta["quota"].(map[string]any)
	count, _ := quota["token_count"].(map[string]any)
	if count == nil {
		return Usage{}, false
	}
	num := func(k string) int64 {
		f, _ := count[k].(float64)
		return int64(f)
	}
	return Usage{InputTokens: num("input_tokens"), OutputTokens: num("output_tokens")}, true
}
