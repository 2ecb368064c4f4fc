#!/usr/bin/env python3
"""Writes a real-shaped `kubectl get nodes -o yaml` NodeList of N AWS H100 nodes to stdout:
full objects with labels, annotations, managedFields, taints, conditions, images and
nodeInfo, about 20 KiB each (what the budgets must admit for --nodes-file).

    python3 bench/real_nodes.py 5000 > /tmp/nodes-5000.yaml
"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
w = sys.stdout.write
w("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n")
for i in range(n):
    name = f"ip-10-{i // 250}-{i % 250}-1.ec2.internal"
    w(f"- apiVersion: v1\n  kind: Node\n  metadata:\n    annotations:\n")
    for k in range(12):
        w(f"      alpha.kubernetes.io/annotation-{k}: '{{\"key\":\"value-{k}\",\"node\":\"{name}\",\"pad\":\"{'x' * 40}\"}}'\n")
    w(f"    creationTimestamp: \"2026-01-0{i % 9 + 1}T00:00:00Z\"\n    labels:\n")
    w(f"      kubernetes.io/hostname: {name}\n      nvidia.com/gpu.present: \"true\"\n")
    w("      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n      nvidia.com/gpu.count: \"8\"\n")
    w("      node.kubernetes.io/instance-type: p5.48xlarge\n      topology.kubernetes.io/zone: us-east-1a\n")
    for k in range(50):
        w(f"      feature.node.kubernetes.io/cpu-cpuid.FEATURE{k}: \"true\"\n")
    w("    managedFields:\n")
    for m in range(6):
        w(f"    - apiVersion: v1\n      fieldsType: FieldsV1\n      fieldsV1:\n        f:metadata:\n          f:labels:\n")
        for k in range(25):
            w(f"            f:feature.node.kubernetes.io/cpu-cpuid.FEATURE{k}: {{}}\n")
        w(f"      manager: manager-{m}\n      operation: Update\n      time: \"2026-01-01T00:00:00Z\"\n")
    w(f"    name: {name}\n    resourceVersion: \"{1000 + i}\"\n    uid: 00000000-0000-0000-0000-{i:012d}\n")
    w(f"  spec:\n    providerID: aws:///us-east-1a/i-{i:016x}\n")
    w("    taints:\n    - effect: NoSchedule\n      key: nvidia.com/gpu\n      value: \"true\"\n")
    w("  status:\n    addresses:\n    - address: 10.0.0.1\n      type: InternalIP\n")
    w(f"    - address: {name}\n      type: Hostname\n")
    w("    allocatable:\n      cpu: 191450m\n      ephemeral-storage: \"27527505146\"\n      hugepages-1Gi: \"0\"\n")
    w("      memory: 2047034436Ki\n      nvidia.com/gpu: \"8\"\n      pods: \"100\"\n      vpc.amazonaws.com/efa: \"32\"\n")
    w("    capacity:\n      cpu: \"192\"\n      memory: 2097152000Ki\n      nvidia.com/gpu: \"8\"\n      pods: \"100\"\n")
    w("    conditions:\n")
    for c in ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]:
        w(f"    - lastHeartbeatTime: \"2026-01-01T00:00:00Z\"\n      lastTransitionTime: \"2026-01-01T00:00:00Z\"\n      message: kubelet reports {c}\n      reason: Kubelet{c}\n      status: \"False\"\n      type: {c}\n")
    w("    daemonEndpoints:\n      kubeletEndpoint:\n        Port: 10250\n    images:\n")
    for k in range(40):
        w(f"    - names:\n      - nvcr.io/nvidia/image-{k}@sha256:{'%064x' % (k * 7919 + i)}\n      - nvcr.io/nvidia/image-{k}:26.01-py3\n      sizeBytes: {1000000 + k}\n")
    w(f"    nodeInfo:\n      architecture: amd64\n      bootID: {i}\n      containerRuntimeVersion: containerd://1.7.0\n      kernelVersion: 6.1.0\n")
    w("      kubeProxyVersion: v1.33.0\n      kubeletVersion: v1.33.0\n      machineID: m\n      operatingSystem: linux\n")
    w("      osImage: Amazon Linux 2023\n      systemUUID: u\n")
