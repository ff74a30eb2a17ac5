package main

// runDRA runs upstream's structured allocator (k8s.io/dynamic-resource-allocation/structured,
// with v1.37's default DRA feature gates) on one DRA scenario, node by node.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type draScenario struct {
	Nodes     []*v1.Node                   `json:"nodes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated [][3]string                  `json:"allocated"`
	Shared    []draShare                   `json:"shared"`
}

// draShare is one allocation of a device that allows multiple allocations (a shareID in an
// allocated claim's result), with the capacity it consumes.
type draShare struct {
	Device           [3]string                                       `json:"device"`
	ConsumedCapacity map[resourceapi.QualifiedName]resource.Quantity `json:"consumedCapacity"`
}

type draNodeResult struct {
	Error       *string                        `json:"error"`
	Allocations []resourceapi.AllocationResult `json:"allocations"`
}

type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// The allocator features of v1.37's default gates (DynamicResources' AllocatorFeatures).
// DRAFractionalCapacityRange is off: `kube-scheduler --help` of 1.37.1 says "BETA -
// default=false", on only with --min-compatibility-version>=1.37.
var draFeatures = structured.Features{
	AdminAccess:             true,
	PrioritizedList:         true,
	PartitionableDevices:    true,
	DeviceTaints:            true,
	DeviceBindingAndStatus:  true,
	ConsumableCapacity:      true,
	FractionalCapacityRange: false,
}

func runDRA(ctx context.Context, sc *draScenario) (map[string]draNodeResult, error) {
	allocated := sets.New[structured.DeviceID]()
	for _, id := range sc.Allocated {
		allocated.Insert(structured.MakeDeviceID(id[0], id[1], id[2]))
	}
	state := structured.AllocatedState{
		AllocatedDevices:         allocated,
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for i, share := range sc.Shared {
		deviceID := structured.MakeDeviceID(share.Device[0], share.Device[1], share.Device[2])
		shareID := types.UID(fmt.Sprintf("share-%d", i))
		state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(deviceID, &shareID))
		if share.ConsumedCapacity != nil {
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(deviceID, share.ConsumedCapacity))
		}
	}
	celCache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: true})
	out := map[string]draNodeResult{}
	for _, node := range sc.Nodes {
		allocator, err := structured.NewAllocator(ctx, draFeatures, state, classLister(sc.Classes), sc.Slices, celCache)
		if err != nil {
			return nil, fmt.Errorf("new allocator: %w", err)
		}
		results, err := allocator.Allocate(ctx, node, sc.Claims)
		r := draNodeResult{Allocations: results}
		if err != nil {
			msg := err.Error()
			r.Error = &msg
			r.Allocations = nil
		}
		out[node.Name] = r
	}
	return out, nil
}
