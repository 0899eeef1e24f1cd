"""EKS: a VPC with a public and a private subnet per zone, an EKS cluster (pulumi_eks), a system
node group, one managed node group per GPU pool, and EFS behind ModelCache's RWX StorageClass.

Every AWS resource goes through an explicit provider for `eks.region`, so the cluster lands where
the config says whatever `aws:region` is. Explicit providers do not read `aws:*` stack config, so
`aws:profile` is passed on by hand; other credentials come from the environment (AWS_PROFILE, ...).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from ...api.inference_class import EKSProvisioning
from ...render.cache import EFS_FILE_SYSTEM_ID
from ...render.types import GPU_TAINT_KEY, POOL_LABEL
from .base import GPU_TAINT_VALUE, SYSTEM_POOL, ClusterAccess, ClusterRequest, GpuPool

SYSTEM_INSTANCE_TYPE = "m6i.xlarge"
SYSTEM_AMI = "AL2023_x86_64_STANDARD"
GPU_AMI = "AL2023_x86_64_NVIDIA"
ROOT_DEVICE = "/dev/xvda"  # AL2023's root volume, sized through the launch template when there is one
PRIVATE_SUBNET_OFFSET = 48 * 256  # private subnet = public subnet + 48 in the third octet (as the reference)
ZONE_LETTERS = "abcdef"  # subnetCidrs[i] lives in zone <region><letter i>
EFS_CSI_SERVICE_ACCOUNT = "efs-csi-controller-sa"
NODE_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
}


@dataclass
class EKSAccess(ClusterAccess):
    """ClusterAccess plus what the rendered StorageClass needs from the AWS side."""

    cluster_name: str = ""  # the EKS cluster's AWS name (cluster-autoscaler discovers node groups by it)
    file_system_id: pulumi.Output[str] | None = None  # the EFS behind modelplane-rwx-efs; None without GPU pools

    def deployed_values(self) -> dict[str, pulumi.Input[str]]:
        values = super().deployed_values()
        if self.file_system_id is not None:
            values[EFS_FILE_SYSTEM_ID] = self.file_system_id
        return values


@dataclass
class _Network:
    vpc: aws.ec2.Vpc
    public: list[aws.ec2.Subnet]
    private: dict[str, aws.ec2.Subnet]  # by zone
    ready: list[pulumi.Resource]  # routes the nodes need to reach the internet (image pulls)


def provision(request: ClusterRequest, parent: pulumi.Resource) -> EKSAccess:
    """Long: the cluster's resources in the order they depend on each other."""
    block = request.block()
    zones = subnet_zones(request)
    profile = pulumi.Config("aws").get("profile")
    provider = aws.Provider(
        f"{request.name}-aws", region=block.region, profile=profile, opts=pulumi.ResourceOptions(parent=parent)
    )
    opts = pulumi.ResourceOptions(parent=parent, provider=provider)
    components = pulumi.ResourceOptions(parent=parent, providers=[provider])

    network = _network(request, zones, opts)
    node_role = _role(f"{request.name}-node", {"Service": "ec2.amazonaws.com"}, ["sts:AssumeRole"], NODE_POLICIES, opts)
    name = eks_cluster_name(request.name)
    cluster = eks.Cluster(
        f"{request.name}-eks",
        name=name,
        version=block.kubernetes_version,
        vpc_id=network.vpc.id,
        public_subnet_ids=[s.id for s in network.public],
        private_subnet_ids=[s.id for s in network.private.values()],
        skip_default_node_group=True,
        instance_roles=[node_role.role],
        authentication_mode=eks.AuthenticationMode.API_AND_CONFIG_MAP,
        endpoint_public_access=True,
        endpoint_private_access=True,
        node_associate_public_ip_address=False,
        provider_credential_opts={"profile_name": profile} if profile else None,
        opts=components,
    )

    node_opts = pulumi.ResourceOptions.merge(
        components, pulumi.ResourceOptions(depends_on=[*network.ready, *node_role.attachments])
    )
    system = eks.ManagedNodeGroup(
        f"{request.name}-{SYSTEM_POOL}",
        cluster=cluster,
        node_role=node_role.role,
        instance_types=[SYSTEM_INSTANCE_TYPE],
        ami_type=SYSTEM_AMI,
        labels={POOL_LABEL: SYSTEM_POOL},
        scaling_config={"min_size": 1, "desired_size": 1, "max_size": 2},
        subnet_ids=[s.id for s in network.private.values()],
        ignore_scaling_changes=True,
        opts=node_opts,
    )
    gpu = [
        _gpu_node_group(request, pool, cluster, node_role.role, network, opts, node_opts, parent)
        for pool in request.pools
    ]

    ready: list[pulumi.Resource] = [system, *gpu]
    file_system_id = None
    if request.pools:  # only clusters that run replicas stage model caches
        file_system_id, efs_ready = _efs(request, name, cluster, system, network, opts)
        ready += efs_ready
    return EKSAccess(
        kubeconfig=pulumi.Output.secret(cluster.kubeconfig_json),
        ready=ready,
        cluster_name=name,
        file_system_id=file_system_id,
    )


def eks_cluster_name(name: str) -> str:
    """A fixed AWS name (not auto-named) so addons and the autoscaler can name the cluster before it
    exists; the stack is part of it so two stacks of the project can share a region."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{name}-{pulumi.get_stack()}")[:100]


def subnet_zones(request: ClusterRequest) -> list[str]:
    """The zone of each subnet pair; fails when a pool names a zone the network does not cover."""
    block = request.block()
    zones = [f"{block.region}{letter}" for letter in ZONE_LETTERS[: len(block.networking.subnet_cidrs)]]
    for pool in request.pools:
        missing = [zone for zone in pool.pool.zones or [] if zone not in zones]
        if missing:
            raise pulumi.RunError(
                f"cluster {request.name}: pool {pool.name} uses zone(s) {', '.join(missing)} but eks.networking."
                f"subnetCidrs covers only {', '.join(zones)} (one zone per CIDR, in letter order); add subnet CIDRs"
            )
    return zones


def _private_cidr(request: ClusterRequest, public: str) -> str:
    vpc = ipaddress.ip_network(request.block().networking.vpc_cidr)
    network = ipaddress.ip_network(public)
    private = ipaddress.ip_network(f"{network.network_address + PRIVATE_SUBNET_OFFSET}/{network.prefixlen}")
    if not private.subnet_of(vpc):  # type: ignore[arg-type]  # one family: a public subnet lies in the VPC
        raise pulumi.RunError(
            f"cluster {request.name}: the private subnet for {public} would be {private} "
            f"(third octet +48), outside vpcCidr {vpc}; widen vpcCidr or pick lower subnet CIDRs"
        )
    return str(private)


def _network(request: ClusterRequest, zones: list[str], opts: pulumi.ResourceOptions) -> _Network:
    name, networking = request.name, request.block().networking
    vpc = aws.ec2.Vpc(
        f"{name}-vpc",
        cidr_block=networking.vpc_cidr,
        enable_dns_hostnames=True,
        enable_dns_support=True,
        tags={"Name": name},
        opts=opts,
    )
    gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=opts)
    public_routes = aws.ec2.RouteTable(
        f"{name}-public", vpc_id=vpc.id, opts=opts, routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}]
    )
    public, private = [], {}
    for zone, cidr in zip(zones, networking.subnet_cidrs, strict=False):
        subnet = aws.ec2.Subnet(
            f"{name}-public-{zone}",
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=zone,
            map_public_ip_on_launch=True,
            tags={"kubernetes.io/role/elb": "1"},
            opts=opts,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-{zone}", subnet_id=subnet.id, route_table_id=public_routes.id, opts=opts
        )
        public.append(subnet)
        private[zone] = aws.ec2.Subnet(
            f"{name}-private-{zone}",
            vpc_id=vpc.id,
            availability_zone=zone,
            cidr_block=_private_cidr(request, cidr),
            tags={"kubernetes.io/role/internal-elb": "1"},
            opts=opts,
        )
    # One NAT gateway for the whole VPC: nodes only pull images through it, and each costs by the hour.
    address = aws.ec2.Eip(f"{name}-nat", domain="vpc", opts=opts)
    nat = aws.ec2.NatGateway(
        f"{name}-nat",
        allocation_id=address.id,
        subnet_id=public[0].id,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[gateway])),
    )
    private_routes = aws.ec2.RouteTable(
        f"{name}-private", vpc_id=vpc.id, opts=opts, routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}]
    )
    associations: list[pulumi.Resource] = [
        aws.ec2.RouteTableAssociation(
            f"{name}-private-{zone}", subnet_id=subnet.id, route_table_id=private_routes.id, opts=opts
        )
        for zone, subnet in private.items()
    ]
    return _Network(vpc, public, private, associations)


@dataclass
class _Role:
    role: aws.iam.Role
    attachments: list[aws.iam.RolePolicyAttachment]


def _role(
    name: str, principal: dict, actions: list[str], policies: dict[str, str], opts: pulumi.ResourceOptions
) -> _Role:
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": principal, "Action": actions}]}
    role = aws.iam.Role(name, assume_role_policy=json.dumps(trust), opts=opts)
    return _Role(
        role,
        [
            aws.iam.RolePolicyAttachment(f"{name}-{short}", role=role.name, policy_arn=arn, opts=opts)
            for short, arn in policies.items()
        ],
    )


def _gpu_node_group(
    request: ClusterRequest,
    pool: GpuPool,
    cluster: eks.Cluster,
    node_role: aws.iam.Role,
    network: _Network,
    opts: pulumi.ResourceOptions,
    node_opts: pulumi.ResourceOptions,
    parent: pulumi.Resource,
) -> eks.ManagedNodeGroup:
    """Long: one node group's arguments, most of them plain settings."""
    spec = pool.provisioning_block(EKSProvisioning)
    name = f"{request.name}-{pool.name}"
    zones = pool.pool.zones or list(network.private)
    args: dict[str, Any] = {
        "cluster": cluster,
        "node_role": node_role,
        "instance_types": [spec.instance_type],
        "ami_type": GPU_AMI,
        "labels": pool.labels(),
        "taints": [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}],
        "subnet_ids": [network.private[zone].id for zone in zones],
        # desired is seeded from nodeCount once; afterwards the autoscaler owns it
        "scaling_config": {
            "min_size": pool.min_nodes,
            "desired_size": pool.pool.node_count,
            "max_size": pool.max_nodes,
        },
        "ignore_scaling_changes": True,
    }
    efa = pool.pool.fabric_type == "EFA"
    if pool.pool.capacity_block is not None:
        # A capacity block is bought capacity in one zone: instances launch into it through a launch
        # template; the disk then has to be sized there too (EKS rejects disk_size next to a template).
        template = aws.ec2.LaunchTemplate(
            name,
            opts=opts,
            instance_market_options={"market_type": "capacity-block"},
            capacity_reservation_specification={
                "capacity_reservation_target": {
                    "capacity_reservation_id": pool.pool.capacity_block.capacity_reservation_id
                }
            },
            block_device_mappings=[
                {
                    "device_name": ROOT_DEVICE,
                    "ebs": {
                        "volume_size": spec.disk_size_gb,
                        "volume_type": "gp3",
                        "encrypted": "true",
                        "delete_on_termination": "true",
                    },
                }
            ],
        )
        args.update(
            capacity_type="CAPACITY_BLOCK",
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
        )
        if efa:
            pulumi.log.warn(
                f"cluster {request.name}: pool {pool.name} has a capacity block and fabric EFA; its nodes "
                "get no EFA interfaces (not supported together yet), only the default network",
                parent,
            )
    else:
        args.update(disk_size=spec.disk_size_gb)
        if efa:
            # pulumi_eks attaches one EFA interface per network card and puts the nodes in a cluster
            # placement group, which lives in a single zone: the pool's first.
            args.update(enable_efa_support=True, placement_group_availability_zone=zones[0])
    return eks.ManagedNodeGroup(name, **args, opts=node_opts)


def _efs(
    request: ClusterRequest,
    cluster_name: str,
    cluster: eks.Cluster,
    system: eks.ManagedNodeGroup,
    network: _Network,
    opts: pulumi.ResourceOptions,
) -> tuple[pulumi.Output[str], list[pulumi.Resource]]:
    """An encrypted, elastic-throughput EFS reachable from every private subnet, and its CSI driver."""
    name = request.name
    nfs = aws.ec2.SecurityGroup(
        f"{name}-efs",
        vpc_id=network.vpc.id,
        description="NFS from the cluster's VPC to EFS",
        ingress=[
            {
                "protocol": "tcp",
                "from_port": 2049,
                "to_port": 2049,
                "cidr_blocks": [request.block().networking.vpc_cidr],
            }
        ],
        opts=opts,
    )
    file_system = aws.efs.FileSystem(
        f"{name}-cache", encrypted=True, throughput_mode="elastic", tags={"Name": f"{name}-modelcache"}, opts=opts
    )
    mounts = [
        aws.efs.MountTarget(
            f"{name}-cache-{zone}",
            file_system_id=file_system.id,
            subnet_id=subnet.id,
            security_groups=[nfs.id],
            opts=opts,
        )
        for zone, subnet in network.private.items()
    ]
    # Addons go ACTIVE only once their pods run, so they wait for the system nodes.
    after_nodes = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[cluster, system]))
    agent = aws.eks.Addon(
        f"{name}-pod-identity-agent", cluster_name=cluster_name, addon_name="eks-pod-identity-agent", opts=after_nodes
    )
    driver_role = _role(
        f"{name}-efs-csi",
        {"Service": "pods.eks.amazonaws.com"},
        ["sts:AssumeRole", "sts:TagSession"],
        {"efs": "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"},
        opts,
    )
    driver = aws.eks.Addon(
        f"{name}-efs-csi",
        cluster_name=cluster_name,
        addon_name="aws-efs-csi-driver",
        pod_identity_associations=[{"role_arn": driver_role.role.arn, "service_account": EFS_CSI_SERVICE_ACCOUNT}],
        opts=pulumi.ResourceOptions.merge(
            after_nodes, pulumi.ResourceOptions(depends_on=[agent, *driver_role.attachments])
        ),
    )
    return file_system.id, [driver, *mounts]
