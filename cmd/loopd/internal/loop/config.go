package loop

import (
	"time"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func milli(p *int, def float64) float64 {
	if p == nil {
		return def
	}
	return float64(*p) / 1000
}

// client builds the llama client for one slot.
func client(c loopd.Config, slot int) (*llama.Client, error) {
	topK := llama.DefaultTopK
	if c.Model.TopK != nil {
		topK = *c.Model.TopK
	}
	return llama.New(llama.Config{
		SocketPath: c.InferSocket,
		Model:      c.Model.Name,
		IDSlot:     slot,
		Sampling: &llama.Sampling{
			Temperature: milli(c.Model.TemperatureMilli, llama.DefaultTemperature),
			TopP:        milli(c.Model.TopPMilli, llama.DefaultTopP),
			TopK:        topK,
		},
		ThinkingCap:      c.Model.ThinkingCap,
		MaxTokens:        c.Model.MaxTokens,
		FirstByteTimeout: ms(c.Model.FirstByteTimeoutMS),
		ModelLoadTimeout: ms(c.Model.ModelLoadTimeoutMS),
		IdleTimeout:      ms(c.Model.IdleTimeoutMS),
	})
}

func limits(c loopd.Config) turn.Limits {
	return turn.Limits{MaxCalls: c.Turn.MaxCalls, RepeatLimit: c.Turn.RepeatLimit, ResultCap: c.Turn.ToolResultCap}
}
