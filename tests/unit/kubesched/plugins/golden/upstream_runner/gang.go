package main

// GangScheduling (GenericWorkload) alone: PreEnqueue over the scheduler cache's pod group
// state, PlacementFeasible over progress pairs, and the QueueingHints it registers.

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/gangscheduling"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

type gangEvent struct {
	Event string          `json:"event"`
	Old   json.RawMessage `json:"old"`
	New   json.RawMessage `json:"new"`
}

type gangScenario struct {
	Name     string                      `json:"name"`
	PodGroup *schedulingv1beta1.PodGroup `json:"podGroup"`
	Members  []*v1.Pod                   `json:"members"`
	Pod      *v1.Pod                     `json:"pod"`
	Progress [][2]int                    `json:"progress"`
	Events   []gangEvent                 `json:"events"`
}

type statusOut struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type gangResult struct {
	Name       string       `json:"name"`
	PreEnqueue statusOut    `json:"preEnqueue"`
	Feasible   []*statusOut `json:"feasible"`
	Hints      []string     `json:"hints"`
}

func out(s *fwk.Status) statusOut {
	return statusOut{Code: s.Code().String(), Message: s.Message()}
}

func runGang(ctx context.Context, sc *gangScenario) (*gangResult, error) {
	c := internalcache.New(ctx, nil, true, false)
	if sc.PodGroup != nil {
		c.AddPodGroup(sc.PodGroup)
	}
	for _, p := range sc.Members {
		c.AddPodGroupMember(p)
	}
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithPodGroupManager(c),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewEmptySnapshot()))
	if err != nil {
		return nil, err
	}
	p, err := gangscheduling.New(ctx, nil, fh, feature.Features{EnableGenericWorkload: true})
	if err != nil {
		return nil, err
	}
	res := &gangResult{Name: sc.Name}
	res.PreEnqueue = out(p.(fwk.PreEnqueuePlugin).PreEnqueue(ctx, sc.Pod))
	for _, pr := range sc.Progress {
		if sc.PodGroup == nil {
			res.Feasible = append(res.Feasible, nil)
			continue
		}
		info := &framework.PodGroupInfo{Namespace: "ns", Name: sc.PodGroup.Name, Type: fwk.PodGroupKeyType, PodGroup: sc.PodGroup}
		s := out(p.(framework.PlacementFeasiblePlugin).PlacementFeasible(ctx, nil, info,
			framework.PlacementProgress{Remaining: pr[0], Scheduled: pr[1]}))
		res.Feasible = append(res.Feasible, &s)
	}
	events, err := p.(fwk.EnqueueExtensions).EventsToRegister(ctx)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	for _, e := range sc.Events {
		var resource fwk.EventResource
		var action fwk.ActionType
		var oldObj, newObj interface{}
		switch e.Event {
		case "UnscheduledPodAdd", "AssignedPodAdd":
			resource, action = fwk.UnscheduledPod, fwk.Add
			if e.Event == "AssignedPodAdd" {
				resource = fwk.AssignedPod
			}
			pod := &v1.Pod{}
			if err := json.Unmarshal(e.New, pod); err != nil {
				return nil, err
			}
			newObj = pod
		default:
			resource, action = fwk.PodGroup, fwk.Add
			if e.Event == "PodGroupUpdate" {
				action = fwk.Update
				old := &schedulingv1beta1.PodGroup{}
				if err := json.Unmarshal(e.Old, old); err != nil {
					return nil, err
				}
				oldObj = old
			}
			pg := &schedulingv1beta1.PodGroup{}
			if err := json.Unmarshal(e.New, pg); err != nil {
				return nil, err
			}
			newObj = pg
		}
		hint := "none registered"
		for _, ev := range events {
			if ev.Event.Resource == resource && ev.Event.ActionType&action != 0 {
				h, err := ev.QueueingHintFn(logger, sc.Pod, oldObj, newObj)
				if err != nil {
					return nil, err
				}
				hint = h.String()
			}
		}
		res.Hints = append(res.Hints, hint)
	}
	return res, nil
}
