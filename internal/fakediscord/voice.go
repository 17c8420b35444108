package fakediscord

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
)

// VoiceMessageFlag is the message flag of a voice message
// (IS_VOICE_MESSAGE, 1<<13), which arikawa does not name.
const VoiceMessageFlag discord.MessageFlags = 1 << 13

// Voice is a voice message a user records: an Ogg Opus file, how long
// Discord says it is (duration_secs) and its waveform (256 bytes at most,
// base64 on the wire).
type Voice struct {
	Data     []byte
	Duration float64
	Waveform []byte
}

// VoiceOf is a voice message of length d, with data OggOpus(d).
func VoiceOf(d time.Duration) Voice {
	return Voice{Data: OggOpus(d), Duration: d.Seconds(), Waveform: make([]byte, 64)}
}

// PostVoice posts a voice message as Discord's client does: no content,
// the voice-message flag, one attachment voice-message.ogg (audio/ogg)
// served by the fake, carrying duration_secs and waveform in the
// MESSAGE_CREATE. mentions are the users it pings (a reply to the bot
// pings the bot). The stored message, as REST reads it, has no duration
// or waveform: arikawa's Attachment has no field for them.
func (s *Server) PostVoice(ch discord.ChannelID, author discord.User, v Voice, mentions ...discord.User) discord.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	att := s.attachLocked(Upload{Name: "voice-message.ogg", ContentType: "audio/ogg", Data: v.Data})
	m := &Message{Message: discord.Message{
		ID:          discord.MessageID(s.id()),
		ChannelID:   ch,
		GuildID:     c.GuildID,
		Type:        discord.DefaultMessage,
		Author:      author,
		Flags:       VoiceMessageFlag,
		Attachments: []discord.Attachment{att},
		Timestamp:   discord.NewTimestamp(time.Now()),
	}}
	for _, u := range mentions {
		m.Mentions = append(m.Mentions, discord.GuildUser{User: u})
	}
	s.userPostingLocked(c, author.ID)
	c.messages = append(c.messages, m)
	s.dispatchLocked("MESSAGE_CREATE", voiceWire(m.Message, v))
	s.notifyLocked()
	return m.Message
}

// voiceWire is m as Discord sends a voice message: its attachment with
// duration_secs and waveform.
func voiceWire(m discord.Message, v Voice) map[string]any {
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		panic(err)
	}
	atts, _ := wire["attachments"].([]any)
	for _, a := range atts {
		if a, ok := a.(map[string]any); ok {
			a["duration_secs"] = v.Duration
			a["waveform"] = v.Waveform // base64, as encoding/json writes []byte
		}
	}
	return wire
}

// OggOpus is a minimal Ogg Opus stream of length d: the OpusHead and
// OpusTags headers, then one page whose granule position ends the stream
// at d (48 kHz, with a pre-skip of 312 samples), checksums included. It
// holds no audio a decoder could play; it is what a reader of the
// container sees.
func OggOpus(d time.Duration) []byte {
	const preSkip = 312
	head := make([]byte, 19)
	copy(head, "OpusHead")
	head[8] = 1 // version
	head[9] = 1 // channels
	binary.LittleEndian.PutUint16(head[10:], preSkip)
	binary.LittleEndian.PutUint32(head[12:], 48000)
	tags := append([]byte("OpusTags"), 0, 0, 0, 0, 0, 0, 0, 0)
	granule := uint64(d.Seconds()*48000) + preSkip
	var out []byte
	out = append(out, oggPage(0x02, 0, 0, head)...)
	out = append(out, oggPage(0, 0, 1, tags)...)
	out = append(out, oggPage(0x04, granule, 2, make([]byte, 3))...)
	return out
}

// oggCRC is the Ogg checksum: CRC-32, polynomial 0x04c11db7, not
// reflected, initial value and final xor 0.
var oggCRC = func() *[256]uint32 {
	var t [256]uint32
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04c11db7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return &t
}()

// oggPage is one page holding one packet of under 255 bytes.
func oggPage(flags byte, granule uint64, seq uint32, packet []byte) []byte {
	p := make([]byte, 27, 28+len(packet))
	copy(p, "OggS")
	p[5] = flags
	binary.LittleEndian.PutUint64(p[6:], granule)
	binary.LittleEndian.PutUint32(p[14:], 1) // stream serial number
	binary.LittleEndian.PutUint32(p[18:], seq)
	p[26] = 1
	p = append(p, byte(len(packet)))
	p = append(p, packet...)
	var crc uint32
	for _, b := range p {
		crc = crc<<8 ^ oggCRC[byte(crc>>24)^b]
	}
	binary.LittleEndian.PutUint32(p[22:], crc)
	return p
}
