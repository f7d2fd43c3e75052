// Mesh arithmetic: pure functions, no processes.
#include "runtime/dist/mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

// A shape with cfg outermost (its default place) and the other three axes in `order`.
MeshShape Shape(int ring, int ulysses, int tp, std::array<Axis, 3> order = {Axis::kTp, Axis::kRing, Axis::kUlysses},
                int cfg = 1) {
  MeshShape s;
  s.ring = ring;
  s.ulysses = ulysses;
  s.tp = tp;
  s.cfg = cfg;
  s.order = {Axis::kCfg, order[0], order[1], order[2]};
  return s;
}

TEST(Mesh, Ring2Ulysses2DefaultOrder) {
  Mesh m(Shape(2, 2, 1), 4);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(m.Groups(Axis::kWorld), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(m.CoordsOf(3), (Mesh::Coords{1, 1, 0}));
  EXPECT_EQ(m.CoordsOf(2), (Mesh::Coords{1, 0, 0}));
  EXPECT_EQ(m.AxisRank(2, Axis::kRing), 1);
  EXPECT_EQ(m.AxisRank(2, Axis::kUlysses), 0);
  EXPECT_EQ(m.AxisRank(2, Axis::kCp), 2);
}

TEST(Mesh, Ring2Ulysses2Tp2DefaultOrder) {
  Mesh m(Shape(2, 2, 2), 8);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.CoordsOf(6), (Mesh::Coords{1, 0, 1}));
  EXPECT_EQ(m.GroupRanks(6, Axis::kTp), (std::vector<int>{2, 6}));
  EXPECT_EQ(m.GroupIndex(6, Axis::kRing), 2);
  EXPECT_EQ(m.GroupIndex(6, Axis::kCp), 1);
  EXPECT_EQ(m.AxisRank(6, Axis::kCp), 2);
}

TEST(Mesh, Ring2Ulysses2Tp2UlyssesOutermostRingInnermost) {
  Mesh m(Shape(2, 2, 2, {Axis::kUlysses, Axis::kTp, Axis::kRing}), 8);
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // CP rank = ring * ulysses + ulysses coordinate, whatever the placement order.
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_EQ(m.CoordsOf(5), (Mesh::Coords{1, 1, 0}));
  EXPECT_EQ(m.AxisRank(5, Axis::kCp), 3);
  EXPECT_EQ(m.AxisRank(4, Axis::kCp), 1);
}

TEST(Mesh, Ring3Ulysses2BothOrders) {
  Mesh a(Shape(3, 2, 1), 6);
  EXPECT_EQ(a.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(a.Groups(Axis::kRing), (Groups{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(a.Groups(Axis::kCp), (Groups{{0, 1, 2, 3, 4, 5}}));
  Mesh b(Shape(3, 2, 1, {Axis::kUlysses, Axis::kRing, Axis::kTp}), 6);
  EXPECT_EQ(b.Groups(Axis::kRing), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(b.Groups(Axis::kUlysses), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(b.Groups(Axis::kCp), (Groups{{0, 3, 1, 4, 2, 5}}));
}

TEST(Mesh, Ulysses3Tp2) {
  Mesh m(Shape(1, 3, 2), 6);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.Size(Axis::kCp), 3);
  EXPECT_EQ(m.Size(Axis::kWorld), 6);
}

// Every shape up to 8 ranks, every order of the four axes: groups partition the world, have the
// axis size, are ordered by axis rank, and coordinates round-trip.
TEST(Mesh, GroupsPartitionTheWorldForAllShapesAndOrders) {
  std::array<Axis, kNumBaseAxes> order = kDefaultOrder;
  std::sort(order.begin(), order.end());
  int shapes = 0;
  do {
    for (int ring = 1; ring <= 8; ++ring)
      for (int ulysses = 1; ring * ulysses <= 8; ++ulysses)
        for (int tp = 1; ring * ulysses * tp <= 8; ++tp)
          for (int cfg = 1; ring * ulysses * tp * cfg <= 8; ++cfg) {
            MeshShape shape;
            shape.ring = ring;
            shape.ulysses = ulysses;
            shape.tp = tp;
            shape.cfg = cfg;
            shape.order = order;
            Mesh m(shape, shape.WorldSize());
            ++shapes;
            for (int r = 0; r < m.world_size(); ++r) EXPECT_EQ(m.RankOf(m.CoordsOf(r)), r);
            for (Axis axis : kAllAxes) {
              std::set<int> seen;
              for (const std::vector<int>& g : m.Groups(axis)) {
                ASSERT_EQ(static_cast<int>(g.size()), m.Size(axis)) << m.shape().ToString();
                for (size_t i = 0; i < g.size(); ++i) {
                  EXPECT_TRUE(seen.insert(g[i]).second);
                  EXPECT_EQ(m.AxisRank(g[i], axis), static_cast<int>(i));
                  EXPECT_EQ(m.GroupRanks(g[i], axis), g);
                }
              }
              EXPECT_EQ(static_cast<int>(seen.size()), m.world_size());
            }
          }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_GT(shapes, 24 * 20);
}

// cfg outermost by default: each guidance branch runs on a contiguous block of ranks, which holds
// a whole ring x ulysses x tp mesh; the cp group stays inside one branch.
TEST(Mesh, Cfg2Ulysses2Tp2DefaultOrder) {
  Mesh m(Shape(1, 2, 2, {Axis::kTp, Axis::kRing, Axis::kUlysses}, 2), 8);
  EXPECT_EQ(m.Groups(Axis::kCfg), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.CoordsOf(6), (Mesh::Coords{0, 0, 1, 1}));
  EXPECT_EQ(m.AxisRank(6, Axis::kCfg), 1);
  EXPECT_EQ(m.shape().ToString(), "ring=1,ulysses=2,tp=2,cfg=2");
  MeshShape inner = m.shape();
  inner.order = {Axis::kTp, Axis::kRing, Axis::kUlysses, Axis::kCfg};
  EXPECT_EQ(inner.ToString(), "ring=1,ulysses=2,tp=2,cfg=2,order=tp:ring:ulysses:cfg");
  EXPECT_EQ(Mesh(inner, 8).Groups(Axis::kCfg), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(Mesh, WorldSizeMismatchIsAnError) {
  try {
    Mesh m(Shape(2, 2, 1), 6);
    FAIL() << "no error";
  } catch (const DistError& e) {
    EXPECT_STREQ(e.what(), "mesh ring=2,ulysses=2,tp=1 has 4 ranks (ring*ulysses*tp*cfg) but the world has 6");
  }
  EXPECT_THROW(Mesh(Shape(0, 2, 1), 0), DistError);
  EXPECT_THROW(Mesh(Shape(2, 1, 1, {Axis::kRing, Axis::kRing, Axis::kTp}), 2), DistError);
}

}  // namespace
}  // namespace weft::dist
