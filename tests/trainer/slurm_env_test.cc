// Slurm's host lists, tasks per node and a task's rendezvous variables
// (trainer/slurm_env.cc), from the forms Slurm writes.
#include "slurm_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace imagepack::trainer {
namespace {

using Names = std::vector<std::string>;

Names Expand(const std::string& list) {
  auto r = ExpandNodeList(list);
  EXPECT_TRUE(r.ok()) << list << ": " << r.status().ToString();
  return r.ok() ? *r : Names{};
}

std::string ErrorOf(const std::string& list) {
  auto r = ExpandNodeList(list);
  EXPECT_FALSE(r.ok()) << list << " expanded to " << (r.ok() ? r->size() : 0) << " names";
  return r.ok() ? "" : r.status().message();
}

TEST(NodeList, PlainNamesAndCommas) {
  EXPECT_EQ(Expand("a,b"), (Names{"a", "b"}));
  EXPECT_EQ(Expand("gpu-01"), (Names{"gpu-01"}));
  EXPECT_EQ(Expand("vm"), (Names{"vm"}));
  EXPECT_EQ(Expand("node1.cluster.example,node2"), (Names{"node1.cluster.example", "node2"}));
}

TEST(NodeList, RangesInBrackets) {
  EXPECT_EQ(Expand("n[1,3-5]"), (Names{"n1", "n3", "n4", "n5"}));
  EXPECT_EQ(Expand("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Expand("a,n[2-3],b"), (Names{"a", "n2", "n3", "b"}));
  EXPECT_EQ(Expand("n[7]"), (Names{"n7"}));
}

TEST(NodeList, ZeroPaddingIsKept) {
  EXPECT_EQ(Expand("rack1-n[01-04]"), (Names{"rack1-n01", "rack1-n02", "rack1-n03", "rack1-n04"}));
  EXPECT_EQ(Expand("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(Expand("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  // The padding is each range's own.
  EXPECT_EQ(Expand("n[001-002,7]"), (Names{"n001", "n002", "n7"}));
}

TEST(NodeList, SuffixesAndSeveralBrackets) {
  EXPECT_EQ(Expand("n[1-2]-ib"), (Names{"n1-ib", "n2-ib"}));
  EXPECT_EQ(Expand("r[1-2]n[1-2]"), (Names{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(Expand("r[1-2]n[1,3]x,z"), (Names{"r1n1x", "r1n3x", "r2n1x", "r2n3x", "z"}));
}

TEST(NodeList, FirstNodeExpandsOnlyTheFirst) {
  EXPECT_EQ(FirstNode("rack1-n[01-04]").value(), "rack1-n01");
  EXPECT_EQ(FirstNode("a,b").value(), "a");
  EXPECT_EQ(FirstNode("n[3-5,1]").value(), "n3");
  // A list far past the budget still has a first node; its syntax is checked.
  EXPECT_EQ(FirstNode("n[0-999999999]").value(), "n0");
  EXPECT_FALSE(FirstNode("a,n[1-").ok());
}

TEST(NodeList, BadListsNameTheOffset) {
  EXPECT_EQ(ErrorOf(""), "empty host list");
  EXPECT_EQ(ErrorOf("n[1-3"), "host list \"n[1-3\", byte 5: '[' without ']'");
  EXPECT_EQ(ErrorOf("n[3-1]"), "host list \"n[3-1]\", byte 4: range ends before it starts");
  EXPECT_EQ(ErrorOf("a,,b"), "host list \"a,,b\", byte 2: empty host name");
  EXPECT_EQ(ErrorOf("a,"), "host list \"a,\", byte 2: empty host name");
  EXPECT_EQ(ErrorOf("n[a]"), "host list \"n[a]\", byte 2: expected a number");
  EXPECT_EQ(ErrorOf("n[1;2]"), "host list \"n[1;2]\", byte 3: expected ',', '-' or ']' in a range");
  EXPECT_EQ(ErrorOf("a b"), "host list \"a b\", byte 1: unexpected character ' '");
  EXPECT_EQ(ErrorOf("n[1234567890123456789]"),
            "host list \"n[1234567890123456789]\", byte 2: number of more than 18 digits");
}

TEST(NodeList, BudgetsRefuseHugeLists) {
  EXPECT_NE(ErrorOf("n[0-1048576]").find("names more than 1048576 hosts"), std::string::npos);
  EXPECT_NE(ErrorOf("a[0-1023]b[0-1024]").find("names more than"), std::string::npos);
  EXPECT_EQ(Expand("n[1-1048576]").size(), 1048576u);
  EXPECT_NE(ErrorOf(std::string(kMaxNodeListBytes + 1, 'a')).find("longer than 65536 bytes"), std::string::npos);
}

TEST(TasksPerNode, RepeatsAndLists) {
  EXPECT_EQ(TasksOnNode("2", 0).value(), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 0).value(), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 2).value(), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 3).value(), 1);
  EXPECT_EQ(TasksOnNode("4,3,1(x2)", 1).value(), 3);
  EXPECT_EQ(TasksOnNode("4,3,1(x2)", 3).value(), 1);
  EXPECT_EQ(TasksOnNode("2(x3),1", 4).status().message(), "tasks per node \"2(x3),1\" covers 4 node(s), not node 4");
  EXPECT_FALSE(TasksOnNode("2(3)", 0).ok());
  EXPECT_FALSE(TasksOnNode("2(x3", 0).ok());
  EXPECT_FALSE(TasksOnNode("2,", 0).ok());
  EXPECT_FALSE(TasksOnNode("2(x0)", 0).ok());
  EXPECT_FALSE(TasksOnNode("", 0).ok());
}

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

// What srun gives the second task of `srun -n 4` over 2 nodes, 2 tasks each.
FakeEnv TwoNodeStep() {
  return {{{"SLURM_NTASKS", "4"},
           {"SLURM_PROCID", "3"},
           {"SLURM_LOCALID", "1"},
           {"SLURM_NODEID", "1"},
           {"SLURM_STEP_ID", "0"},
           {"SLURM_JOB_ID", "123456"},
           {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
           {"SLURM_TASKS_PER_NODE", "3(x2)"},
           {"SLURM_STEP_NODELIST", "rack1-n[07-08]"},
           {"SLURM_JOB_NODELIST", "rack1-n[06-08]"}}};
}

TEST(SlurmStep, RanksAddressAndPortFromSrunsVariables) {
  FakeEnv env = TwoNodeStep();
  auto st = ReadSlurmStep(env.lookup());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->rank, 3);
  EXPECT_EQ(st->world_size, 4);
  EXPECT_EQ(st->local_rank, 1);
  EXPECT_EQ(st->local_world_size, 2);  // the step's tasks on this node, not the job's
  EXPECT_EQ(st->master_addr, "rack1-n07");  // the step's first node
  EXPECT_EQ(st->master_port, 20000 + 123456 % 20000);
  EXPECT_EQ(st->cpus_per_task, 0);
}

TEST(SlurmStep, ExportedAddressAndPortWin) {
  FakeEnv env = TwoNodeStep();
  env.vars["MASTER_ADDR"] = "10.0.0.5";
  env.vars["MASTER_PORT"] = "29600";
  env.vars["SLURM_CPUS_PER_TASK"] = "8";
  auto st = ReadSlurmStep(env.lookup());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->master_addr, "10.0.0.5");
  EXPECT_EQ(st->master_port, 29600);
  EXPECT_EQ(st->cpus_per_task, 8);
}

TEST(SlurmStep, FallsBackToTheJobsListAndTasksPerNode) {
  FakeEnv env = TwoNodeStep();
  env.vars.erase("SLURM_STEP_NODELIST");
  env.vars.erase("SLURM_STEP_TASKS_PER_NODE");
  auto st = ReadSlurmStep(env.lookup());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->master_addr, "rack1-n06");
  EXPECT_EQ(st->local_world_size, 3);
  env.vars.erase("SLURM_TASKS_PER_NODE");
  env.vars["SLURM_NTASKS_PER_NODE"] = "2";
  env.vars.erase("SLURM_JOB_NODELIST");
  env.vars["SLURM_NODELIST"] = "a,b";
  st = ReadSlurmStep(env.lookup());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->local_world_size, 2);
  EXPECT_EQ(st->master_addr, "a");
}

TEST(SlurmStep, ErrorsNameTheVariable) {
  FakeEnv env = TwoNodeStep();
  env.vars.erase("SLURM_STEP_ID");  // the batch script itself, not an srun task
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(),
            "SLURM_NTASKS=4 but this process is not a task of a job step (no SLURM_STEP_ID): start it with srun");
  env = TwoNodeStep();
  env.vars["SLURM_PROCID"] = "4";
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(), "SLURM_PROCID=4 is not in [0, 3]");
  env = TwoNodeStep();
  env.vars["SLURM_NTASKS"] = "4x";
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(), "SLURM_NTASKS='4x' is not an integer");
  env = TwoNodeStep();
  env.vars["SLURM_STEP_NODELIST"] = "n[1-";
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(),
            "SLURM_STEP_NODELIST: host list \"n[1-\", byte 4: expected a number");
  env = TwoNodeStep();
  env.vars["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(), "SLURM_LOCALID=1 but 1 task(s) of the step on this node");
  env = TwoNodeStep();
  env.vars.erase("SLURM_JOB_ID");
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(), "no MASTER_PORT and no SLURM_JOB_ID to derive it from");
  env = TwoNodeStep();
  env.vars["MASTER_PORT"] = "70000";
  EXPECT_EQ(ReadSlurmStep(env.lookup()).status().message(), "MASTER_PORT=70000 is not in [1, 65535]");
}

TEST(SlurmStep, OneTaskNeedsNoStepNorAddress) {
  FakeEnv env{{{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}}};
  auto st = ReadSlurmStep(env.lookup());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->world_size, 1);
  EXPECT_EQ(st->local_world_size, 1);
}

}  // namespace
}  // namespace imagepack::trainer
