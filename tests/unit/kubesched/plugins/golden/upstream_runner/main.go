// Command golden runs kube-scheduler 1.37's own plugins over scenarios and writes what they
// decide, so kubesched's plugins can be checked against upstream's code, not a reading of it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/imagelocality"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

type scenario struct {
	Name         string                `json:"name"`
	Nodes        []*v1.Node            `json:"nodes"`
	Existing     []*v1.Pod             `json:"existing"`
	Namespaces   []*v1.Namespace       `json:"namespaces"`
	Services     []*v1.Service         `json:"services"`
	ReplicaSets  []*appsv1.ReplicaSet  `json:"replicasets"`
	StatefulSets []*appsv1.StatefulSet `json:"statefulsets"`
	Pod          *v1.Pod               `json:"pod"`
}

type filterResult struct {
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

type result struct {
	Name    string                     `json:"name"`
	Nodes   []string                   `json:"nodes"`
	Filters map[string][]*filterResult `json:"filters"`
	Scores  map[string][]int64         `json:"scores"`
}

var resources = []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}

func plugins(ctx context.Context, fh fwk.Handle, fts feature.Features) (map[string]fwk.Plugin, error) {
	out := map[string]fwk.Plugin{}
	add := func(name string, p fwk.Plugin, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out[name] = p
		return nil
	}
	type ctor func() (fwk.Plugin, error)
	ctors := map[string]ctor{
		"TaintToleration":   func() (fwk.Plugin, error) { return tainttoleration.New(ctx, nil, fh, fts) },
		"NodeUnschedulable": func() (fwk.Plugin, error) { return nodeunschedulable.New(ctx, nil, fh, fts) },
		"NodePorts":         func() (fwk.Plugin, error) { return nodeports.New(ctx, nil, fh, fts) },
		"NodeAffinity": func() (fwk.Plugin, error) {
			return nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, fh, fts)
		},
		"LeastAllocated": func() (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
				Type: config.LeastAllocated, Resources: resources}}, fh, fts)
		},
		"MostAllocated": func() (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
				Type: config.MostAllocated, Resources: resources}}, fh, fts)
		},
		"RequestedToCapacityRatio": func() (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
				Type: config.RequestedToCapacityRatio, Resources: resources,
				RequestedToCapacityRatio: &config.RequestedToCapacityRatioParam{Shape: []config.UtilizationShapePoint{
					{Utilization: 0, Score: 0}, {Utilization: 30, Score: 8}, {Utilization: 100, Score: 3}}}}}, fh, fts)
		},
		"NodeResourcesBalancedAllocation": func() (fwk.Plugin, error) {
			return noderesources.NewBalancedAllocation(ctx, &config.NodeResourcesBalancedAllocationArgs{Resources: resources}, fh, fts)
		},
		"ImageLocality": func() (fwk.Plugin, error) { return imagelocality.New(ctx, nil, fh) },
		"PodTopologySpread": func() (fwk.Plugin, error) {
			return podtopologyspread.New(ctx, &config.PodTopologySpreadArgs{DefaultingType: config.SystemDefaulting}, fh, fts)
		},
		"InterPodAffinity": func() (fwk.Plugin, error) {
			return interpodaffinity.New(ctx, &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}, fh, fts)
		},
	}
	for name, c := range ctors {
		p, err := c()
		if err := add(name, p, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func run(ctx context.Context, sc *scenario) (*result, error) {
	objs := []runtime.Object{}
	for _, ns := range sc.Namespaces {
		objs = append(objs, ns)
	}
	for _, o := range sc.Services {
		objs = append(objs, o)
	}
	for _, o := range sc.ReplicaSets {
		objs = append(objs, o)
	}
	for _, o := range sc.StatefulSets {
		objs = append(objs, o)
	}
	client := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := cache.NewSnapshot(sc.Existing, sc.Nodes)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithInformerFactory(factory))
	if err != nil {
		return nil, err
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	pls, err := plugins(ctx, fh, fts)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	res := &result{Name: sc.Name, Filters: map[string][]*filterResult{}, Scores: map[string][]int64{}}
	for _, ni := range nodeInfos {
		res.Nodes = append(res.Nodes, ni.Node().Name)
	}
	for name, p := range pls {
		if f, ok := p.(fwk.FilterPlugin); ok && name != "MostAllocated" && name != "RequestedToCapacityRatio" {
			state := framework.NewCycleState()
			skip := false
			if pf, ok := p.(fwk.PreFilterPlugin); ok {
				_, s := pf.PreFilter(ctx, state, sc.Pod, nodeInfos)
				if s.IsSkip() {
					skip = true
				} else if !s.IsSuccess() {
					return nil, fmt.Errorf("%s PreFilter: %v", name, s)
				}
			}
			var out []*filterResult
			for _, ni := range nodeInfos {
				if skip {
					out = append(out, nil)
					continue
				}
				s := f.Filter(ctx, state, sc.Pod, ni)
				if s.IsSuccess() {
					out = append(out, nil)
				} else {
					out = append(out, &filterResult{Code: s.Code().String(), Reasons: s.Reasons()})
				}
			}
			res.Filters[name] = out
		}
		if sp, ok := p.(fwk.ScorePlugin); ok {
			state := framework.NewCycleState()
			if pf, ok := p.(fwk.PreFilterPlugin); ok {
				pf.PreFilter(ctx, state, sc.Pod, nodeInfos)
			}
			if ps, ok := p.(fwk.PreScorePlugin); ok {
				s := ps.PreScore(ctx, state, sc.Pod, nodeInfos)
				if s.IsSkip() {
					res.Scores[name] = nil
					continue
				}
				if !s.IsSuccess() {
					return nil, fmt.Errorf("%s PreScore: %v", name, s)
				}
			}
			list := make(fwk.NodeScoreList, len(nodeInfos))
			for i, ni := range nodeInfos {
				score, s := sp.Score(ctx, state, sc.Pod, ni)
				if !s.IsSuccess() {
					return nil, fmt.Errorf("%s Score: %v", name, s)
				}
				list[i] = fwk.NodeScore{Name: ni.Node().Name, Score: score}
			}
			if ext := sp.ScoreExtensions(); ext != nil {
				if s := ext.NormalizeScore(ctx, state, sc.Pod, list); !s.IsSuccess() {
					return nil, fmt.Errorf("%s NormalizeScore: %v", name, s)
				}
			}
			scores := make([]int64, len(list))
			for i := range list {
				scores[i] = list[i].Score
			}
			res.Scores[name] = scores
		}
	}
	return res, nil
}

func main() {
	schedmetrics.Register()
	if len(os.Args) > 2 && os.Args[1] == "preemption" {
		runAll(os.Args[2], runPreemption)
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "dra" {
		runAll(os.Args[2], runDRA)
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "gang" {
		runAll(os.Args[2], runGang)
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "volumes" {
		runAll(os.Args[2], runVolumes)
		return
	}
	runAll(os.Args[1], run)
}

// runAll decodes the scenarios in path, runs each and prints the results as JSON.
func runAll[S any, R any](path string, runOne func(context.Context, *S) (R, error)) {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var scenarios []*S
	if err := json.Unmarshal(data, &scenarios); err != nil {
		panic(err)
	}
	var results []R
	for i, sc := range scenarios {
		ctx, cancel := context.WithCancel(context.Background())
		r, err := runOne(ctx, sc)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "scenario %d: %v\n", i, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	out, _ := json.MarshalIndent(results, "", " ")
	fmt.Println(string(out))
}
