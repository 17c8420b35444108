package backends

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Compact asks pi to summarise the session req.SessionID with its RPC
// compact command, on the conversation's kept process when req fits it
// (req.Key and the settings of the conversation's turns), else on a new
// one resuming the session. pi calls the model with its summarising
// prompt and keeps the session id. The Result is Compacted, with what the
// summary cost (pi's session total before and after) and the context
// left as far as pi knows it (it reports none until the next answer).
func (p *Pi) Compact(ctx context.Context, req Request) (Result, error) {
	if req.SessionID == "" {
		return Result{}, fmt.Errorf("%w: no session to compact", ErrNotCompacted)
	}
	return p.rpc.compact(ctx, req)
}

func (r *piRPC) compact(ctx context.Context, req Request) (Result, error) {
	bin, err := r.run.binary()
	if err != nil {
		return Result{}, err
	}
	pp, err := r.acquire(ctx, bin, req)
	if err != nil {
		return Result{}, err
	}
	res, reusable, err := r.compactOn(ctx, pp)
	r.pool.release(pp, reusable)
	return res, err
}

// piRPCCompactStopWait bounds the wait for pi to give up a compaction
// that was stopped (the abort command) before its process is killed.
const piRPCCompactStopWait = 5 * time.Second

// compactOn runs the compact command on pp; reusable is set when the
// process may take the conversation's next turn.
func (r *piRPC) compactOn(ctx context.Context, pp *piRPCProc) (res Result, reusable bool, err error) {
	pp.drain()
	if pp.exited.Load() {
		return Result{}, false, &Error{Kind: KindCrashed, Message: "pi process ended before the compaction"}
	}
	before, err := r.command(ctx, pp, "get_session_stats")
	if err != nil {
		return Result{}, false, err
	}
	l, err := r.command(ctx, pp, "compact")
	if err != nil {
		return Result{}, false, err
	}
	if !l.Success {
		// pi refused: nothing to compact yet, or the model call failed.
		return Result{SessionID: pp.session}, true, fmt.Errorf("%w: %s", ErrNotCompacted, l.Error)
	}
	res = Result{SessionID: pp.session, Model: pp.model, Compacted: true}
	if after, err := r.command(ctx, pp, "get_session_stats"); err == nil {
		res.CostUSD = max(piRPCSessionCost(after.Data)-piRPCSessionCost(before.Data), 0)
		res.ContextTokens, res.ContextWindow = piRPCContext(after.Data)
	}
	if res.CostUSD == 0 {
		// pi 0.73.1 leaves the summary's model call out of its session
		// cost: estimate it from the conversation's size and the model's
		// price in pi's own model list (get_state).
		if st, err := r.command(ctx, pp, "get_state"); err == nil {
			if usd, ok := piRPCCompactionEstimate(l.Data, st.Data); ok {
				res.CostUSD, res.CostEstimated = usd, true
			}
		}
	}
	return res, true, nil
}

// piRPCCompactionEstimate is what a compaction cost at the model's list
// price: the conversation it read (tokensBefore) as input, the summary
// as output (a token for every four bytes). ok is false without a price.
func piRPCCompactionEstimate(compact, state json.RawMessage) (usd float64, ok bool) {
	var c struct {
		Summary      string  `json:"summary"`
		TokensBefore float64 `json:"tokensBefore"`
	}
	var st struct {
		Model struct {
			Cost struct {
				Input  float64 `json:"input"`
				Output float64 `json:"output"`
			} `json:"cost"`
		} `json:"model"`
	}
	if unmarshalLenient(compact, &c) != nil || unmarshalLenient(state, &st) != nil {
		return 0, false
	}
	price := st.Model.Cost
	if price.Input <= 0 && price.Output <= 0 || c.TokensBefore <= 0 {
		return 0, false
	}
	return (c.TokensBefore*price.Input + float64(len(c.Summary)/4)*price.Output) / 1e6, true
}

// command sends a command without arguments to pp and returns pi's
// response, skipping the events printed meanwhile (compaction_start and
// _end). When ctx ends first, pi is asked to abort; a process that does
// not answer within piRPCCompactStopWait is stopped.
func (r *piRPC) command(ctx context.Context, pp *piRPCProc, typ string) (piRPCLine, error) {
	id, err := pp.send(typ)
	if err != nil {
		return piRPCLine{}, &Error{Kind: KindCrashed, Message: "pi process ended before " + typ, Err: err}
	}
	done := ctx.Done()
	var stopC <-chan time.Time
	for {
		select {
		case line, ok := <-pp.lines:
			if !ok {
				return piRPCLine{}, &Error{Kind: KindCrashed, Message: "pi process ended during " + typ}
			}
			l, err := parsePiRPC(line)
			if err != nil || l.Kind != piRPCResponse || l.ID != id {
				continue
			}
			if stopC != nil {
				return piRPCLine{}, contextError(ctx, context.Cause(ctx))
			}
			return l, nil
		case <-done:
			done = nil
			if _, err := pp.send("abort"); err != nil {
				pp.log.Debug().Err(err).Msg("could not send the abort")
			}
			stopC = r.clock().After(piRPCCompactStopWait)
		case <-stopC:
			pp.warmClose("compaction not stopped")
			return piRPCLine{}, contextError(ctx, context.Cause(ctx))
		}
	}
}

// piRPCSessionCost is the session's total cost in a get_session_stats
// response (USD), 0 when absent.
func piRPCSessionCost(data json.RawMessage) float64 {
	var d struct {
		Cost float64 `json:"cost"`
	}
	if unmarshalLenient(data, &d) != nil {
		return 0
	}
	return d.Cost
}
