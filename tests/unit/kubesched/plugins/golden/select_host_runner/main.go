// Generates select-host cases with Go's container/heap and kube-scheduler 1.37.1's
// nodeScoreHeap ordering (TotalScore desc, then Randomizer desc; Randomizer is 0 without extenders).
package main

import (
	"container/heap"
	"encoding/json"
	"math/rand"
	"os"
)

type item struct {
	Index int
	Total int64
}
type h []item

func (x h) Len() int            { return len(x) }
func (x h) Less(i, j int) bool  { return x[i].Total > x[j].Total }
func (x h) Swap(i, j int)       { x[i], x[j] = x[j], x[i] }
func (x *h) Push(v interface{}) { *x = append(*x, v.(item)) }
func (x *h) Pop() interface{}   { o := *x; n := len(o); v := o[n-1]; *x = o[:n-1]; return v }

type tc struct {
	Totals []int64 `json:"totals"`
	Chosen int     `json:"chosen"`
}

func main() {
	r := rand.New(rand.NewSource(137))
	var out []tc
	for k := 0; k < 400; k++ {
		n := 2 + r.Intn(60)
		levels := 1 + r.Intn(4)
		totals := make([]int64, n)
		x := make(h, n)
		for i := range totals {
			totals[i] = int64(100 * r.Intn(levels))
			x[i] = item{i, totals[i]}
		}
		heap.Init(&x)
		out = append(out, tc{totals, heap.Pop(&x).(item).Index})
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
