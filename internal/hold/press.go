package hold

import (
	"context"
	"slices"
	"strings"
)

// ButtonPrefix starts the id of every button the gate posts:
// "hold:apply:<hold id>" and "hold:discard:<hold id>".
const ButtonPrefix = "hold:"

const (
	actionApply   = "apply"
	actionDiscard = "discard"
)

func buttonID(action, id string) string { return ButtonPrefix + action + ":" + id }

// Press is a click on one of the gate's buttons.
type Press struct {
	ButtonID string
	UserID   string
	// ManageGuild is whether the presser may manage the server.
	ManageGuild bool
	// Roles are the presser's roles in the server; none in a DM.
	Roles []string
}

// Answer is what the press shows: Update replaces the message for everyone
// (and removes its buttons); otherwise Notice is shown to the presser only.
type Answer struct {
	Update *string
	Notice string
}

// Notices a presser can get.
const (
	noticeNotApprover = "Only the gateway's approvers can apply or discard schedule changes (APPROVER_IDS and APPROVER_ROLE_IDS; without them, ALLOWED_USER_IDS and ALLOWED_ROLE_IDS, or members who can manage this server)."
	noticeGone        = "This change was already applied, discarded or replaced."
)

// Press applies or discards a hold for an approver.
func (g *Gate) Press(ctx context.Context, p Press) Answer {
	action, id, ok := strings.Cut(strings.TrimPrefix(p.ButtonID, ButtonPrefix), ":")
	if !ok || (action != actionApply && action != actionDiscard) {
		return Answer{Notice: noticeGone}
	}
	log := g.log.With().Str("user", p.UserID).Str("action", action).Logger()
	if !g.approver(p) {
		log.Info().Msg("schedule hold button pressed by someone who is not an approver: refused")
		return Answer{Notice: noticeNotApprover}
	}
	g.op.Lock()
	defer g.op.Unlock()
	var h *Hold
	for _, name := range Files {
		if c := g.holds[name]; c != nil && c.ID == id {
			h = c
		}
	}
	if h == nil {
		return Answer{Notice: noticeGone}
	}
	log = log.With().Str("file", h.File).Logger()
	if action == actionDiscard {
		delete(g.holds, h.File)
		g.saveOrLog()
		log.Info().Msg("held schedule change discarded")
		text := closedMessage(h, "🗑️ Discarded by <@"+p.UserID+">: `"+h.File+"` stays as it was.")
		return Answer{Update: &text}
	}
	cur, err := g.readDisk(h.File)
	if err != nil || cur != h.Before {
		// Changed since the hold was made: the next check judges that edit;
		// writing over it would lose it.
		return Answer{Notice: "`" + h.File + "` was changed since this was posted, so it is not applied; the newer change is judged on its own."}
	}
	if err := g.restore(h.File, h.After); err != nil {
		log.Error().Err(err).Msg("could not write the approved schedule change")
		return Answer{Notice: "Could not write `" + h.File + "`; nothing was applied. The gateway's log says why."}
	}
	g.applied[h.File] = h.After
	delete(g.undecided, h.File)
	delete(g.holds, h.File)
	g.saveOrLog()
	log.Info().Msg("held schedule change applied")
	outcome := "✅ Applied by <@" + p.UserID + ">."
	if h.File != schedulelessFile {
		if err := g.reloadLocked(); err != nil {
			log.Warn().Err(err).Msg("reload after applying a held change")
			outcome += " Some items could not be scheduled: " + firstLine(err.Error())
		}
	} else {
		outcome += " It takes effect at the next start."
	}
	text := closedMessage(h, outcome)
	return Answer{Update: &text}
}

// approver reports whether p's presser may decide on holds.
func (g *Gate) approver(p Press) bool {
	switch {
	case g.opts.IsApprover != nil:
		return g.opts.IsApprover(p)
	case len(g.opts.Approvers) > 0:
		return slices.Contains(g.opts.Approvers, p.UserID)
	case len(g.opts.AllowedUsers) > 0:
		return slices.Contains(g.opts.AllowedUsers, p.UserID)
	default:
		return p.ManageGuild
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
