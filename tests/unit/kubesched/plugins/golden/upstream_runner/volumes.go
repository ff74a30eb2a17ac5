package main

// The volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions) over
// scenarios with PersistentVolumes, claims, StorageClasses and CSI objects: PreFilter's
// status when it rejects, each node's Filter status otherwise, and VolumeBinding's scores.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumebinding"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumerestrictions"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumezone"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

type volumeScenario struct {
	Name                 string                          `json:"name"`
	Nodes                []*v1.Node                      `json:"nodes"`
	Existing             []*v1.Pod                       `json:"existing"`
	Pod                  *v1.Pod                         `json:"pod"`
	PVs                  []*v1.PersistentVolume          `json:"pvs"`
	PVCs                 []*v1.PersistentVolumeClaim     `json:"pvcs"`
	StorageClasses       []*storagev1.StorageClass       `json:"storageClasses"`
	CSINodes             []*storagev1.CSINode            `json:"csiNodes"`
	CSIDrivers           []*storagev1.CSIDriver          `json:"csiDrivers"`
	CSIStorageCapacities []*storagev1.CSIStorageCapacity `json:"csiStorageCapacities"`
}

type volumeResult struct {
	Name      string                     `json:"name"`
	Nodes     []string                   `json:"nodes"`
	PreFilter map[string]*filterResult   `json:"preFilter"`
	Filters   map[string][]*filterResult `json:"filters"`
	Scores    map[string][]int64         `json:"scores"`
}

func runVolumes(ctx context.Context, sc *volumeScenario) (*volumeResult, error) {
	objs := []runtime.Object{}
	for _, o := range sc.PVs {
		objs = append(objs, o)
	}
	for _, o := range sc.PVCs {
		objs = append(objs, o)
	}
	for _, o := range sc.StorageClasses {
		objs = append(objs, o)
	}
	for _, o := range sc.CSINodes {
		objs = append(objs, o)
	}
	for _, o := range sc.CSIDrivers {
		objs = append(objs, o)
	}
	for _, o := range sc.CSIStorageCapacities {
		objs = append(objs, o)
	}
	for _, o := range sc.Nodes {
		objs = append(objs, o)
	}
	client := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := cache.NewSnapshot(sc.Existing, sc.Nodes)
	csiManager := nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSharedCSIManager(csiManager))
	if err != nil {
		return nil, err
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	pls := map[string]fwk.Plugin{}
	bindingArgs := &config.VolumeBindingArgs{BindTimeoutSeconds: 600, Shape: []config.UtilizationShapePoint{
		{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}}}
	for name, build := range map[string]func() (fwk.Plugin, error){
		"VolumeBinding":      func() (fwk.Plugin, error) { return volumebinding.New(ctx, bindingArgs, fh, fts) },
		"VolumeZone":         func() (fwk.Plugin, error) { return volumezone.New(ctx, nil, fh, fts) },
		"NodeVolumeLimits":   func() (fwk.Plugin, error) { return nodevolumelimits.NewCSI(ctx, nil, fh, fts) },
		"VolumeRestrictions": func() (fwk.Plugin, error) { return volumerestrictions.New(ctx, nil, fh, fts) },
	} {
		p, err := build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pls[name] = p
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	res := &volumeResult{Name: sc.Name, PreFilter: map[string]*filterResult{}, Filters: map[string][]*filterResult{},
		Scores: map[string][]int64{}}
	for _, ni := range nodeInfos {
		res.Nodes = append(res.Nodes, ni.Node().Name)
	}
	for name, p := range pls {
		state := framework.NewCycleState()
		_, s := p.(fwk.PreFilterPlugin).PreFilter(ctx, state, sc.Pod, nodeInfos)
		if s.IsSkip() {
			continue
		}
		if !s.IsSuccess() {
			res.PreFilter[name] = &filterResult{Code: s.Code().String(), Reasons: s.Reasons()}
			continue
		}
		var out []*filterResult
		for _, ni := range nodeInfos {
			fs := p.(fwk.FilterPlugin).Filter(ctx, state, sc.Pod, ni)
			if fs.IsSuccess() {
				out = append(out, nil)
			} else {
				out = append(out, &filterResult{Code: fs.Code().String(), Reasons: fs.Reasons()})
			}
		}
		res.Filters[name] = out
		sp, ok := p.(fwk.ScorePlugin)
		if !ok {
			continue
		}
		if ps := p.(fwk.PreScorePlugin).PreScore(ctx, state, sc.Pod, nodeInfos); ps.IsSkip() {
			continue
		} else if !ps.IsSuccess() {
			return nil, fmt.Errorf("%s PreScore: %v", name, ps)
		}
		var scores []int64
		for i, ni := range nodeInfos {
			if out[i] != nil {
				scores = append(scores, -1) // filtered out: never scored
				continue
			}
			score, ss := sp.Score(ctx, state, sc.Pod, ni)
			if !ss.IsSuccess() {
				return nil, fmt.Errorf("%s Score: %v", name, ss)
			}
			scores = append(scores, score)
		}
		res.Scores[name] = scores
	}
	return res, nil
}
