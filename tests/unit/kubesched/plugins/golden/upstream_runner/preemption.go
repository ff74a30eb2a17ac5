package main

import (
	"context"
	"fmt"

	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

type preemptionScenario struct {
	scenario
	PDBs []*policy.PodDisruptionBudget `json:"pdbs"`
}

type candidateResult struct {
	Victims       []string `json:"victims"`
	PDBViolations int64    `json:"pdbViolations"`
}

type preemptionResult struct {
	Name       string                      `json:"name"`
	Statuses   map[string]*filterResult    `json:"statuses"`
	Candidates map[string]*candidateResult `json:"candidates"`
	NodeStatus map[string]*filterResult    `json:"nodeStatus"`
	Selected   string                      `json:"selected"`
}

// runPreemption filters the pod with the default filters, then runs DefaultPreemption's dry
// run over every Unschedulable node (all of them are candidates) and its candidate choice.
func runPreemption(ctx context.Context, sc *preemptionScenario) (*preemptionResult, error) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	objs := []runtime.Object{sc.Pod}
	for _, p := range sc.Existing {
		objs = append(objs, p)
	}
	for _, ns := range sc.Namespaces {
		objs = append(objs, ns)
	}
	client := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := cache.NewSnapshot(sc.Existing, sc.Nodes)
	adapt := func(f func(context.Context, runtime.Object, fwk.Handle, feature.Features) (fwk.Plugin, error)) frameworkruntime.PluginFactory {
		return frameworkruntime.FactoryAdapter(fts, f)
	}
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(tainttoleration.Name, adapt(tainttoleration.New), "Filter"),
		tf.RegisterPluginAsExtensions(nodeaffinity.Name, adapt(nodeaffinity.New), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(nodeports.Name, adapt(nodeports.New), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(noderesources.Name, adapt(noderesources.NewFit), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(podtopologyspread.Name, adapt(podtopologyspread.New), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(interpodaffinity.Name, adapt(interpodaffinity.New), "PreFilter", "Filter"),
	}, "",
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client),
	)
	if err != nil {
		return nil, err
	}
	pl, err := defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10,
		MinCandidateNodesAbsolute: 100}, fh, fts)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	res := &preemptionResult{Name: sc.Name, Statuses: map[string]*filterResult{},
		Candidates: map[string]*candidateResult{}, NodeStatus: map[string]*filterResult{}}
	state := framework.NewCycleState()
	if _, s, _ := fh.RunPreFilterPlugins(ctx, state, sc.Pod); !s.IsSuccess() {
		return nil, fmt.Errorf("PreFilter: %v", s)
	}
	var potential []fwk.NodeInfo
	for _, ni := range nodeInfos {
		s := fh.RunFilterPluginsWithNominatedPods(ctx, state, sc.Pod, ni)
		if s.IsSuccess() {
			continue
		}
		res.Statuses[ni.Node().Name] = &filterResult{Code: s.Code().String(), Reasons: s.Reasons()}
		if s.Code() == fwk.Unschedulable {
			potential = append(potential, ni)
		}
	}
	if len(potential) == 0 {
		return res, nil
	}
	candidates, statuses, err := pl.Evaluator.DryRunPreemption(ctx, state, sc.Pod, potential, sc.PDBs, 0, int32(len(potential)))
	if err != nil {
		return nil, err
	}
	for _, c := range candidates {
		var names []string
		for _, p := range c.Victims().Pods {
			names = append(names, p.Name)
		}
		res.Candidates[c.Name()] = &candidateResult{Victims: names, PDBViolations: c.Victims().NumPDBViolations}
	}
	statuses.ForEachExplicitNode(func(name string, s *fwk.Status) {
		res.NodeStatus[name] = &filterResult{Code: s.Code().String(), Reasons: s.Reasons()}
	})
	if best := pl.Evaluator.SelectCandidate(ctx, candidates); best != nil {
		res.Selected = best.Name()
	}
	return res, nil
}
